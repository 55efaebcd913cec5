// Package workloads registers every workload's entry with the stack: importing it runs each entry
// package's init, which hands its entry to stacks.Register. The program imports it (main.go), and
// so does every test that loads or deploys a stack; without it the stack refuses to run (stacks'
// entries panics), so a workload cannot be left out silently.
//
// Each workload's entry is a package of its own, stacks/workloads/<key>, beside its component in
// components/: its section's start, defaults and checks in the stack's context, the facts other
// checks need of it, and how it is deployed, allowed and reported. The layout follows Kueue's
// job integrations (pkg/controller/jobs/<kind>, each registering itself, all imported by
// pkg/controller/jobs). The order of the imports does not matter: stacks.Register places each
// entry by its section's field in stacks.Config, the order every phase takes them in.
package workloads

import (
	_ "kolotoc/stacks/workloads/carriers"   // kolotoc:carriers
	_ "kolotoc/stacks/workloads/datain"     // kolotoc:dataIn
	_ "kolotoc/stacks/workloads/elastic"    // kolotoc:elastic
	_ "kolotoc/stacks/workloads/entrypoint" // kolotoc:entrypoint
	_ "kolotoc/stacks/workloads/etcd"       // kolotoc:etcd
	_ "kolotoc/stacks/workloads/monitoring" // kolotoc:monitoring
	_ "kolotoc/stacks/workloads/sentinels"  // kolotoc:sentinels
	_ "kolotoc/stacks/workloads/tfcluster"  // kolotoc:tfcluster
	_ "kolotoc/stacks/workloads/towers"     // kolotoc:towers
)
