package tests

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// The pools' placement and fabric on each cloud (stacks/fabric.go), as the vendors document what
// their systems enforce. Nothing here ran on a cloud or a GPU: each assertion names the document
// it follows, so a reader can tell the vendor's rule from our guess.

// TestEKSFabric: a p4d.24xlarge pool (examples/aws) gets what AWS documents for EFA and NCCL.
func TestEKSFabric(t *testing.T) {
	rec := deploy(t, cloudRaw(t, "aws", nil))

	// Amazon EKS, "Manage EFA devices on Amazon EKS": EFA interfaces are attached at launch
	// through a launch template on managed node groups; eksctl's efaEnabled configures every
	// interface as type EFA. EC2 "Placement groups": a cluster placement group packs instances
	// in one zone. EKS refuses a node group's diskSize beside a launch template.
	ng := inputs(rec.one(t, tEKSNodeGroup, "cluster-gpu"))
	if get(ng, "launchTemplate", "id") != "cluster-gpu-id" || get(ng, "launchTemplate", "version") != "1" {
		t.Errorf("GPU node group launch template %v, want cluster-gpu's latest version", get(ng, "launchTemplate"))
	}
	if get(ng, "diskSize") != nil {
		t.Errorf("GPU node group diskSize %v beside a launch template (EKS refuses both)", get(ng, "diskSize"))
	}
	if subnets, _ := get(ng, "subnetIds").([]any); len(subnets) != 1 || !strings.Contains(fmt.Sprint(subnets[0]), "us-east-1a") {
		t.Errorf("GPU node group subnets %v, want the one of us-east-1a (a placement group and EFA stay in one zone)", subnets)
	}
	lt := inputs(rec.one(t, tLaunchTemplate, "cluster-gpu"))
	nics, _ := get(lt, "networkInterfaces").([]any)
	if len(nics) != 4 {
		t.Fatalf("launch template has %d network interfaces, want p4d.24xlarge's 4 EFAs: %v", len(nics), nics)
	}
	for i, nic := range nics {
		wantDevice, wantGroups := 1.0, []any{"cluster-efa-id"}
		if i == 0 { // the primary keeps the cluster security group for ordinary traffic
			wantDevice, wantGroups = 0.0, []any{fakeNodeSG, "cluster-efa-id"}
		}
		if get(nic, "interfaceType") != "efa" || get(nic, "networkCardIndex") != float64(i) || get(nic, "deviceIndex") != wantDevice ||
			fmt.Sprint(get(nic, "securityGroups")) != fmt.Sprint(wantGroups) {
			t.Errorf("interface %d = %v, want efa on card %d, device %v, groups %v", i, nic, i, wantDevice, wantGroups)
		}
	}
	if get(lt, "vpcSecurityGroupIds") != nil || get(lt, "placement", "groupName") != "kolotoc-aws-gpu" {
		t.Errorf("launch template groups %v placement %v: a template with interfaces names groups per interface only; want placement group kolotoc-aws-gpu",
			get(lt, "vpcSecurityGroupIds"), get(lt, "placement"))
	}
	if root := get(lt, "blockDeviceMappings", "[0]"); get(root, "deviceName") != "/dev/xvda" || get(root, "ebs", "volumeSize") != 100.0 {
		t.Errorf("launch template root volume %v, want /dev/xvda of 100 GiB", root)
	}
	if pg := inputs(rec.one(t, tPlacementGroup, "cluster-gpu")); get(pg, "strategy") != "cluster" || get(pg, "name") != "kolotoc-aws-gpu" {
		t.Errorf("placement group %v, want strategy cluster", pg)
	}
	// EC2, "Get started with EFA and NCCL", step 1: the EFA security group "allows all inbound
	// and outbound traffic to and from the security group itself".
	var efaSG any
	for _, sg := range rec.ofType(tSecurityGroup) {
		if sg.Name == "cluster-efa" {
			efaSG = inputs(sg)
		}
	}
	for _, dir := range []string{"ingress", "egress"} {
		rules, _ := get(efaSG, dir).([]any)
		if len(rules) != 1 || get(rules[0], "self") != true || get(rules[0], "protocol") != "-1" || get(rules[0], "cidrBlocks") != nil {
			t.Errorf("EFA security group %s %v, want all traffic from/to itself only", dir, rules)
		}
	}

	// The CPU pools stay on EKS's own template, over every subnet.
	cpu := inputs(rec.one(t, tEKSNodeGroup, "cluster-cpu"))
	if get(cpu, "launchTemplate") != nil || get(cpu, "diskSize") != 100.0 || len(get(cpu, "subnetIds").([]any)) != 2 {
		t.Errorf("CPU node group: template %v disk %v subnets %v, want EKS's own over both zones", get(cpu, "launchTemplate"), get(cpu, "diskSize"), get(cpu, "subnetIds"))
	}
	checkEFAWorkloads(t, rec, "kolotoc-aws", 4)
}

// checkEFAWorkloads: the EFA device plugin runs on the EFA nodes, each tower requests its share of
// the interfaces, and every rank gets NCCL's environment (the towers' containers, and the sshd
// sessions mpirun starts ranks in).
func checkEFAWorkloads(t *testing.T, rec *recorder, ns string, perTower int) {
	t.Helper()
	// Amazon EKS, "Manage EFA devices on Amazon EKS", EFA device plugin: the plugin advertises
	// vpc.amazonaws.com/efa; pods request it in their limits.
	plugin := decode[appsv1.DaemonSet](t, rec.one(t, tDaemonSet, "efa-device-plugin"))
	pod := plugin.Spec.Template.Spec
	if plugin.Namespace != ns+"-gpu-agents" || pod.NodeSelector["kolotoc.dev/fabric"] != "efa" {
		t.Errorf("EFA device plugin: namespace %v node selector %v", plugin.Namespace, pod.NodeSelector)
	}
	if img := pod.Containers[0].Image; !strings.HasSuffix(img, "/eks/aws-efa-k8s-device-plugin:v0.5.8") {
		t.Errorf("EFA device plugin image %q, want the pinned release", img)
	}
	// Upstream's chart (eks-charts, stable/aws-efa-k8s-device-plugin, templates/daemonset.yaml):
	// hostNetwork, priorityClassName system-node-critical, a CriticalAddonsOnly toleration, and
	// the node's /dev/infiniband mounted beside the kubelet's device-plugins directory.
	if !pod.HostNetwork || pod.PriorityClassName != "system-node-critical" {
		t.Errorf("EFA device plugin hostNetwork %v priorityClassName %q, want the chart's true and system-node-critical", pod.HostNetwork, pod.PriorityClassName)
	}
	if !slices.ContainsFunc(pod.Tolerations, func(tol corev1.Toleration) bool {
		return tol.Key == "CriticalAddonsOnly" && tol.Operator == corev1.TolerationOpExists
	}) {
		t.Errorf("EFA device plugin tolerations %v, want the chart's CriticalAddonsOnly", pod.Tolerations)
	}
	hostPaths := map[string]string{}
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = strings.TrimSuffix(v.HostPath.Path, "/")
		}
	}
	mounted := map[string]bool{}
	for _, m := range pod.Containers[0].VolumeMounts {
		mounted[hostPaths[m.Name]] = true
	}
	if !mounted["/dev/infiniband"] || !mounted["/var/lib/kubelet/device-plugins"] {
		t.Errorf("EFA device plugin mounts %v of the host, want /dev/infiniband and /var/lib/kubelet/device-plugins", mounted)
	}
	c := templateOf(t, rec.one(t, tStatefulSet, "towers")).Spec.Containers[0]
	want := fmt.Sprint(perTower)
	efa := func(list corev1.ResourceList) string {
		if q, ok := list["vpc.amazonaws.com/efa"]; ok {
			return q.String()
		}
		return "none"
	}
	if efa(c.Resources.Limits) != want || efa(c.Resources.Requests) != want {
		t.Errorf("tower requests %v, want vpc.amazonaws.com/efa: %s", c.Resources, want)
	}
	// libfabric's EFA provider allocates its buffers from 2 MiB huge pages. AWS's EKS EFA example
	// (aws-ia terraform-aws-eks-blueprints, patterns/nvidia-gpu-efa, generate-efa-nccl-test.sh)
	// requests hugepages-2Mi: 5120Mi beside all of a node's EFAs, as request and limit alike
	// (Kubernetes, "Manage HugePages": huge page requests must equal limits).
	huge := func(list corev1.ResourceList) string {
		if q, ok := list["hugepages-2Mi"]; ok {
			return q.String()
		}
		return "none"
	}
	if huge(c.Resources.Limits) != "5Gi" || huge(c.Resources.Requests) != "5Gi" {
		t.Errorf("tower requests %v, want hugepages-2Mi: 5120Mi as request and limit", c.Resources)
	}
	env := envValues(c)
	// AWS, "Get started with EFA and NCCL for ML workloads on Amazon EC2": FI_PROVIDER=efa, and
	// GPUDirect RDMA on P4d/P5 (FI_EFA_USE_DEVICE_RDMA=1).
	if env["FI_PROVIDER"] != "efa" || env["FI_EFA_USE_DEVICE_RDMA"] != "1" {
		t.Errorf("tower environment %v, want NCCL's on EFA", env)
	}
	scripts := decode[corev1.ConfigMap](t, rec.one(t, tConfigMap, "towers-scripts"))
	if sshd := scripts.Data["sshd_config"]; !strings.Contains(sshd, "\nSetEnv FI_EFA_FORK_SAFE=1 FI_EFA_USE_DEVICE_RDMA=1 FI_PROVIDER=efa\n") {
		t.Errorf("sshd_config sets no fabric environment for the ranks' sessions:\n%s", sshd)
	}
}

// TestEKSFabricOff: fabric: off keeps the pool compact (one subnet, a placement group) without EFA.
func TestEKSFabricOff(t *testing.T) {
	rec := deploy(t, cloudRaw(t, "aws", map[string]string{
		"nodePools": `[{"name":"gpu","machineType":"p4d.24xlarge","nodes":2,"fabric":"off"},{"name":"cpu","machineType":"m6i.4xlarge"},{"name":"ops","machineType":"m6i.large"}]`,
	}))
	lt := inputs(rec.one(t, tLaunchTemplate, "cluster-gpu"))
	if get(lt, "networkInterfaces") != nil || get(lt, "placement", "groupName") != "kolotoc-aws-gpu" {
		t.Errorf("launch template interfaces %v placement %v, want no EFA, the placement group", get(lt, "networkInterfaces"), get(lt, "placement"))
	}
	for _, sg := range rec.ofType(tSecurityGroup) {
		if sg.Name == "cluster-efa" {
			t.Error("an EFA security group without EFA pools")
		}
	}
	for _, ds := range rec.ofType(tDaemonSet) {
		if ds.Name == "efa-device-plugin" {
			t.Error("the EFA device plugin runs without EFA pools")
		}
	}
	c := templateOf(t, rec.one(t, tStatefulSet, "towers")).Spec.Containers[0]
	if _, ok := c.Resources.Limits["vpc.amazonaws.com/efa"]; ok {
		t.Errorf("towers request EFA with fabric off: %v", c.Resources)
	}
}

// TestGKEPlacement: prod's a2-highgpu-8g pool gets GKE's compact placement policy and gVNIC; its
// CPU pool neither. GKE, "Define compact placement for GKE nodes" (Limitations: A100, L4, H100
// GPUs; one zone) and "Use Google Virtual NIC".
func TestGKEPlacement(t *testing.T) {
	rec := deploy(t, cloudRaw(t, "prod", nil))
	gpu := inputs(rec.one(t, tGKENodePool, "cluster-gpu"))
	if get(gpu, "placementPolicy", "type") != "COMPACT" || get(gpu, "nodeConfig", "gvnic", "enabled") != true {
		t.Errorf("GPU pool placement %v gvnic %v, want COMPACT and gVNIC", get(gpu, "placementPolicy"), get(gpu, "nodeConfig", "gvnic"))
	}
	if zones, _ := get(gpu, "nodeLocations").([]any); len(zones) != 1 {
		t.Errorf("compact GPU pool over zones %v, want one", zones)
	}
	cpu := inputs(rec.one(t, tGKENodePool, "cluster-cpu"))
	if get(cpu, "placementPolicy") != nil || get(cpu, "nodeConfig", "gvnic") != nil {
		t.Errorf("CPU pool placement %v gvnic %v, want neither", get(cpu, "placementPolicy"), get(cpu, "nodeConfig", "gvnic"))
	}

	// N1 machines with attached T4s: GKE's compact placement does not take them (Limitations),
	// so the pool keeps to its zone without the policy.
	rec = deploy(t, cloudRaw(t, "prod", map[string]string{
		"nodePools": `[{"name":"gpu","machineType":"n1-standard-8","gpusPerNode":1,"gpuType":"nvidia-tesla-t4","nodes":2,"zones":["us-central1-a"]},` +
			`{"name":"cpu","machineType":"n2-standard-32","nodes":2,"zones":["us-central1-a"]}]`,
		"towers": `{"count":2,"gpusPerTower":1,"pool":"gpu"}`,
	}))
	t4 := inputs(rec.one(t, tGKENodePool, "cluster-gpu"))
	if get(t4, "placementPolicy") != nil || get(t4, "nodeConfig", "gvnic", "enabled") != true {
		t.Errorf("N1 + T4 pool placement %v gvnic %v, want no policy, gVNIC", get(t4, "placementPolicy"), get(t4, "nodeConfig", "gvnic"))
	}
}

// TestAKSPlacement: the ND96asr_v4 pool joins a proximity placement group of its own. AKS, "Use
// proximity placement groups to reduce latency for your AKS cluster": a group maps to one zone,
// and a pool joins one only when it is created.
func TestAKSPlacement(t *testing.T) {
	rec := deploy(t, cloudRaw(t, "azure", map[string]string{
		"nodePools": `[{"name":"gpu","machineType":"Standard_ND96asr_v4","nodes":2,"zones":["2"]},{"name":"cpu","machineType":"Standard_D16s_v5"}]`,
	}))
	ppg := inputs(rec.one(t, tProximityGroup, "cluster-gpu"))
	if get(ppg, "proximityPlacementGroupType") != "Standard" || fmt.Sprint(get(ppg, "zones")) != "[2]" ||
		get(ppg, "proximityPlacementGroupName") != "kolotoc-azure-gpu" {
		t.Errorf("proximity placement group %v, want Standard in zone 2", ppg)
	}
	gpu := inputs(rec.one(t, tAgentPool, "cluster-gpu"))
	if get(gpu, "proximityPlacementGroupID") != "cluster-gpu-id" {
		t.Errorf("GPU pool's proximity placement group %v, want cluster-gpu's", get(gpu, "proximityPlacementGroupID"))
	}
	if get(inputs(rec.one(t, tAgentPool, "cluster-cpu")), "proximityPlacementGroupID") != nil {
		t.Error("the CPU pool joined a proximity placement group")
	}
	if n := len(rec.ofType(tProximityGroup)); n != 1 {
		t.Errorf("%d proximity placement groups, want the GPU pool's only", n)
	}
}

// TestSimulatedFabric: mirrored on the simulated cloud, the aws example's GPU nodes advertise
// their EFA interfaces and carry their zone and fabric label, as the cloud's would; the towers
// that request the interfaces fit them.
func TestSimulatedFabric(t *testing.T) {
	rec := deploy(t, mirroredRaw(t, "aws", nil))
	var gpuNodes []registered
	for _, n := range rec.simulatedNodes() {
		md := decode[corev1.Node](t, n).ObjectMeta
		var capacity map[string]string
		if err := json.Unmarshal([]byte(md.Annotations["kolotoc.dev/simulated-capacity"]), &capacity); err != nil {
			t.Fatal(err)
		}
		if capacity["nvidia.com/gpu"] == "" {
			if capacity["vpc.amazonaws.com/efa"] != "" {
				t.Errorf("CPU node %s advertises EFA", n.Name)
			}
			continue
		}
		gpuNodes = append(gpuNodes, n)
		labels := md.Labels
		if capacity["vpc.amazonaws.com/efa"] != "4" || labels["kolotoc.dev/fabric"] != "efa" || labels["topology.kubernetes.io/zone"] != "us-east-1a" {
			t.Errorf("GPU node %s: capacity %v labels %v, want 4 EFAs, fabric efa, zone us-east-1a", n.Name, capacity, labels)
		}
		// The towers request huge pages beside their EFAs (checkEFAWorkloads): a node without them
		// would leave every tower Pending.
		if capacity["hugepages-2Mi"] != "5120Mi" {
			t.Errorf("GPU node %s: capacity %v, want hugepages-2Mi: 5120Mi beside its EFAs", n.Name, capacity)
		}
	}
	if len(gpuNodes) != 2 {
		t.Fatalf("%d simulated GPU nodes, want the example's 2", len(gpuNodes))
	}
	checkEFAWorkloads(t, rec, "kolotoc-aws", 4)
	if !slices.ContainsFunc(rec.ofType(tPool), func(r registered) bool { return strings.HasSuffix(r.Name, "-gpu") }) {
		t.Error("no simulated GPU pool")
	}
}

// TestEKSFabricElasticTF: elastic workers and TF workers on the EFA pool take its interfaces,
// their huge pages and NCCL's environment as the towers do (one rule, stacks.PodFabric): NCCL
// over EFA needs the devices in the pod (AWS, "Get started with EFA and NCCL for ML workloads on
// Amazon EC2"), and the huge pages beside them follow AWS's EKS EFA example (aws-ia
// terraform-aws-eks-blueprints, patterns/nvidia-gpu-efa, generate-efa-nccl-test.sh).
func TestEKSFabricElasticTF(t *testing.T) {
	rec := deploy(t, cloudRaw(t, "aws", map[string]string{
		"towers":    `{"count":1,"gpusPerTower":8,"pool":"gpu","launcherPool":"ops"}`,
		"elastic":   `{"enabled":true,"pool":"gpu","minNodes":1,"nodes":1,"maxNodes":1,"command":["python","train.py"]}`,
		"tfcluster": `{"enabled":true,"ps":{"count":1},"workers":{"count":1,"gpus":8,"pool":"gpu"}}`,
	}))
	for _, name := range []string{"elastic", "tfcluster-worker"} {
		c := templateOf(t, rec.one(t, tStatefulSet, name)).Spec.Containers[0]
		for _, r := range []struct{ name, want string }{{"vpc.amazonaws.com/efa", "4"}, {"hugepages-2Mi", "5Gi"}} {
			req, lim := c.Resources.Requests[corev1.ResourceName(r.name)], c.Resources.Limits[corev1.ResourceName(r.name)]
			if req.String() != r.want || lim.String() != r.want {
				t.Errorf("%s requests %s %s, limit %s; want %s both", name, r.name, req.String(), lim.String(), r.want)
			}
		}
		if env := envValues(c); env["FI_PROVIDER"] != "efa" || env["FI_EFA_USE_DEVICE_RDMA"] != "1" {
			t.Errorf("%s environment %v, want NCCL's on EFA", name, env)
		}
	}
	// The parameter servers run on the CPU pool: no fabric.
	ps := templateOf(t, rec.one(t, tStatefulSet, "tfcluster-ps")).Spec.Containers[0]
	if _, ok := ps.Resources.Limits["vpc.amazonaws.com/efa"]; ok {
		t.Errorf("tf-ps requests EFA on a CPU pool: %v", ps.Resources)
	}
}
