package stacks_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"kolotoc/stacks"
)

// TestGrowth: what make fit reports of growth from zero, from the configuration alone: per
// autoscaled pool the nodes its GPU pods take (spread one to a node as Karpenter does while
// maxNodes allows, and packed), whether the pool is Karpenter's on this cloud, and per queued
// workload its need against the quota the queue counts at maxNodes.
func TestGrowth(t *testing.T) {
	const cpu = `{"name":"cpu","machineType":"n2-standard-16"}`
	for _, tc := range []struct {
		name      string
		set       map[string]string
		want      []stacks.PoolGrowth // Pool, Karpenter, MinNodes, MaxNodes, Packed, Needs, Unplaced and the pods' count
		wantQueue map[string]string   // what of the queue: the ring's GPUs against the quota's
	}{
		{name: "two 8-GPU towers from zero: 0 → 2 of 4",
			set: map[string]string{
				"nodePools": `[{"name":"gpu","machineType":"a2-highgpu-8g","minNodes":0,"maxNodes":4},` + cpu + `]`,
			},
			want: []stacks.PoolGrowth{{Pool: "gpu", Karpenter: true, MaxNodes: 4, Packed: 2, Needs: 2}},
		},
		{name: "four 4-GPU towers spread one to a node while maxNodes allows",
			set: map[string]string{
				"nodePools": `[{"name":"gpu","machineType":"a2-highgpu-8g","minNodes":0,"maxNodes":4},` + cpu + `]`,
				"towers":    `{"count":4,"gpusPerTower":4,"pool":"gpu"}`,
			},
			want: []stacks.PoolGrowth{{Pool: "gpu", Karpenter: true, MaxNodes: 4, Packed: 2, Needs: 4}},
		},
		{name: "then share once maxNodes stops them",
			set: map[string]string{
				"nodePools": `[{"name":"gpu","machineType":"a2-highgpu-8g","minNodes":0,"maxNodes":3},` + cpu + `]`,
				"towers":    `{"count":4,"gpusPerTower":4,"pool":"gpu"}`,
			},
			want: []stacks.PoolGrowth{{Pool: "gpu", Karpenter: true, MaxNodes: 3, Packed: 2, Needs: 3}},
		},
		{name: "a pool autoscaled above zero keeps its nodes on the simulated cloud",
			set: map[string]string{
				"nodePools": `[{"name":"gpu","machineType":"a2-highgpu-8g","nodes":1,"minNodes":1,"maxNodes":2},` + cpu + `]`,
			},
			want: []stacks.PoolGrowth{{Pool: "gpu", Karpenter: false, MinNodes: 1, MaxNodes: 2, Packed: 2, Needs: 2}},
		},
		{name: "fixed pools do not grow",
			set:  map[string]string{},
			want: []stacks.PoolGrowth{},
		},
		{name: "an autoscaled CPU pool: no GPU pod to count",
			set: map[string]string{
				"nodePools": `[{"name":"gpu","machineType":"a2-highgpu-8g","nodes":2},{"name":"cpu","machineType":"n2-standard-16","minNodes":0,"maxNodes":3}]`,
			},
			want: []stacks.PoolGrowth{{Pool: "cpu", Karpenter: true, MaxNodes: 3}},
		},
		{name: "queued: the ring's 16 GPUs against the quota of 4 nodes × 8",
			set: map[string]string{
				"nodePools": `[{"name":"gpu","machineType":"a2-highgpu-8g","minNodes":0,"maxNodes":4},` + cpu + `]`,
				"queue":     `{"type":"kueue"}`,
			},
			want:      []stacks.PoolGrowth{{Pool: "gpu", Karpenter: true, MaxNodes: 4, Packed: 2, Needs: 2}},
			wantQueue: map[string]string{"need": "16", "quota": "32", "source": "the sum of nodePools"},
		},
		{name: "queued with queue.quota",
			set: map[string]string{
				"nodePools": `[{"name":"gpu","machineType":"a2-highgpu-8g","minNodes":0,"maxNodes":4},` + cpu + `]`,
				"queue":     `{"type":"kueue","quota":{"gpus":16}}`,
			},
			want:      []stacks.PoolGrowth{{Pool: "gpu", Karpenter: true, MaxNodes: 4, Packed: 2, Needs: 2}},
			wantQueue: map[string]string{"need": "16", "quota": "16", "source": "queue.quota"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadWith(t, "../examples/gpu-dev/Pulumi.gpu-dev.yaml", "dev", tc.set)
			if err != nil {
				t.Fatal(err)
			}
			g := c.Growth()
			var got []stacks.PoolGrowth
			for _, p := range g.Pools {
				got = append(got, stacks.PoolGrowth{Pool: p.Pool, Karpenter: p.Karpenter, MinNodes: p.MinNodes, MaxNodes: p.MaxNodes,
					Packed: p.Packed, Needs: p.Needs, Unplaced: p.Unplaced})
			}
			if len(got) != len(tc.want) || (len(got) > 0 && !reflect.DeepEqual(got, tc.want)) {
				t.Errorf("pools %+v, want %+v", got, tc.want)
			}
			switch {
			case tc.wantQueue == nil && len(g.Queue) > 0:
				t.Errorf("queue %+v without kolotoc:queue", g.Queue)
			case tc.wantQueue != nil && len(g.Queue) != 1:
				t.Errorf("queue %+v, want the ring alone", g.Queue)
			case tc.wantQueue != nil:
				q := g.Queue[0]
				if q.Key != "towers.count" || q.Need["nvidia.com/gpu"] != tc.wantQueue["need"] || q.Quota["nvidia.com/gpu"] != tc.wantQueue["quota"] || q.QuotaSource != tc.wantQueue["source"] {
					t.Errorf("queue %+v, want the ring's %s GPUs against %s (%s)", q, tc.wantQueue["need"], tc.wantQueue["quota"], tc.wantQueue["source"])
				}
			}
			// What make fit reads: the JSON the output carries.
			b, err := json.Marshal(g)
			if err != nil {
				t.Fatal(err)
			}
			var back stacks.Growth
			if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, g) {
				t.Errorf("growth does not survive its JSON: %v\n%s", err, b)
			}
		})
	}
}
