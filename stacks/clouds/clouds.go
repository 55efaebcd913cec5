// Package clouds registers every cloud's entry with the stack: importing it runs each entry
// package's init, which hands its entry to stacks.RegisterCloud. The program imports it (main.go),
// and so does every test that loads or deploys a stack; without it the stack refuses to run
// (stacks' registeredClouds panics), so a cloud cannot be left out silently.
//
// Each cloud's entry is a package of its own, stacks/clouds/<name>, beside its components in
// components/cloud/: what kind of cluster it is, its keys' defaults and checks, its machine
// catalogue, spot label and fabric, its file store, the GPU agents it allows, how its cluster is
// deployed and reached. The layout follows SkyPilot's sky/clouds/<cloud>.py, each cloud a class
// answering the same questions, registered in one registry. The order of the imports does not
// matter: stacks.RegisterCloud places each entry by its name in stacks' cloud names.
package clouds

import (
	_ "kolotoc/stacks/clouds/aws"       // kolotoc:cloud aws
	_ "kolotoc/stacks/clouds/azure"     // kolotoc:cloud azure
	_ "kolotoc/stacks/clouds/existing"  // kolotoc:cloud existing
	_ "kolotoc/stacks/clouds/gcp"       // kolotoc:cloud gcp
	_ "kolotoc/stacks/clouds/simulated" // kolotoc:cloud simulated
)
