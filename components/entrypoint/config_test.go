package entrypoint

import (
	"reflect"
	"testing"
)

// TestConfigDefault: a section that says nothing but what the stack fills (the pool, the Dask
// image) gets Jupyter, TensorBoard and the Dask dashboard on, a ClusterIP Service, JupyterLab, the
// pinned images and the containers' requests; a second Default changes nothing, nor does it touch
// what the stack file says.
func TestConfigDefault(t *testing.T) {
	c := NewConfig()
	c.Pool, c.DaskImage = "cpu", "ghcr.io/dask/dask:2024.9.1" // the stack's
	c.Default()
	want := Config{
		Jupyter: true, TensorBoard: true, DaskDashboard: true, Pool: "cpu", DaskImage: "ghcr.io/dask/dask:2024.9.1",
		ServiceType: ServiceClusterIP, JupyterImage: DefaultJupyterImage, TensorBoardImage: DefaultTensorBoardImage, JupyterUI: UILab,
		SchedulerCPU: DefaultSchedulerCPU, SchedulerMemory: DefaultSchedulerMemory,
		JupyterCPU: DefaultJupyterCPU, JupyterMemory: DefaultJupyterMemory,
		TensorBoardCPU: DefaultTensorBoardCPU, TensorBoardMemory: DefaultTensorBoardMemory,
	}
	for _, after := range []string{"Default", "a second Default"} {
		if !reflect.DeepEqual(c, want) {
			t.Errorf("after %s:\n got %+v\nwant %+v", after, c, want)
		}
		c.Default() // fills zero values only: nothing is left to fill
	}

	set := Config{
		ServiceType: ServiceLoadBalancer, JupyterImage: "quay.io/jupyter/scipy-notebook:2024-09-01",
		TensorBoardImage: "tensorflow/tensorflow:2.16.1", JupyterUI: UINotebook,
		SchedulerCPU: "1", SchedulerMemory: "4Gi", JupyterCPU: "2", JupyterMemory: "8Gi",
		TensorBoardCPU: "500m", TensorBoardMemory: "1Gi",
	}
	kept := set
	kept.Default()
	if !reflect.DeepEqual(kept, set) {
		t.Errorf("Default overwrote what the stack file says: %+v became %+v", set, kept)
	}
	if kept.Pool != "" || kept.DaskImage != "" || kept.Jupyter || kept.TensorBoard || kept.DaskDashboard {
		t.Errorf("Default filled what the stack or the preset decides: %+v", kept)
	}
}
