package ring

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/isolation"
	"kolotoc/components/meta"
)

// What the ring asks of the stack around it: the NetworkPolicy allows its traffic needs and the
// stack outputs that reach it. The stack composes them with the other workloads'.

// Allows are the NetworkPolicy allows of the towers and their launcher. An MPI job is more than
// ssh: mpirun starts an orted on each tower over ssh, each orted connects back to mpirun in the
// launcher, and the ranks talk to one another (Open MPI's TCP transport, Horovod's driver and
// tasks) on ports chosen at run time. Allowing only the ssh port stops every run once the
// policies are enforced.
func Allows() []isolation.Allow {
	pods := func(components ...string) []isolation.Peer { return []isolation.Peer{{Components: components}} }
	return []isolation.Allow{
		{
			Name: "mpi-towers", Pods: []string{towerComponent},
			From: pods(launcherComponent, towerComponent),
			Why: "The launcher and the other towers reach a tower on any port: ssh, then the orted and " +
				"rank-to-rank connections on ports picked at run time. Nothing else reaches the towers' sshd.",
		},
		{
			Name: "mpi-launcher", Pods: []string{launcherComponent},
			From: pods(towerComponent),
			Why:  "The towers' orted daemons and ranks call mpirun back in the launcher, on ports it picks at run time.",
		},
	}
}

// Outputs are the ring's stack outputs, of sizes that do not grow with the towers: the hostname
// pattern and the count, the command that prints the hostfile itself (for mpirun from a tower or
// Jupyter's terminal), a shell in and the log of the first tower and of any tower (tower N, with
// meta.PodIndex), the launcher's log, and the run's state at a glance (runState: its attempt,
// restarts and why, the last checkpoint's step, its phase). kubectl renders a kubectl command
// line for the stack's cluster.
func Outputs(name, launcherName, namespace string, towers int, kubectl func(format string, a ...any) pulumi.StringOutput) pulumi.Map {
	return pulumi.Map{
		"towerHostnamePattern": pulumi.String(HostnamePattern(name, namespace, towers)),
		"towerCount":           pulumi.Int(towers),
		"towerHostfile":        kubectl("-n %s get configmap %s-scripts -o jsonpath='{.data.hostfile}'", namespace, name),
		"gotoTower":            kubectl("-n %s exec -it %s-0 -c %s -- bash", namespace, name, towerComponent),
		"gotoTowerN":           kubectl("-n %s exec -it %s-%s -c %s -- bash", namespace, name, meta.PodIndex, towerComponent),
		"towerLogsN":           kubectl("-n %s logs -f %s-%s -c %s", namespace, name, meta.PodIndex, towerComponent),
		"launcherLogs":         kubectl("-n %s logs -f job/%s -c %s", namespace, launcherName, launcherComponent),
		"runState":             kubectl("-n %s get configmap %s -o %s", namespace, StateName(launcherName), RunStateColumns),
	}
}

// RunStateColumns is how runState prints the state ConfigMap (RenderState): one line under a
// header, the reasons last (they hold spaces).
const RunStateColumns = "custom-columns=RUN:.data.run,PHASE:.data.phase,ATTEMPT:.data.attempt,RESTARTS:.data.restarts," +
	"MAX:.data.maxRestarts,STEP:.data.checkpointStep,UPDATED:.data.updated,REASONS:.data.reasons"
