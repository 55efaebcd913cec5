// Package stacks turns one Pulumi stack's configuration into a training environment: it loads the
// `kolotoc:*` keys into a typed Config, fills defaults, validates the whole, wires the components
// together and exports the stack outputs. It is the one place that decides what an environment is.
//
// The pipeline, one file a phase, each calling the workloads and the features in turn:
//
//	config.go    the Config: one field a key (its `key` tag); keys.go derives the key list
//	load.go      Raw → Config: decode every key strictly (load_errors.go, load_stackfile.go, preview.go)
//	defaults.go  fill the zero values
//	validate.go  check the whole, every problem at once (validate_workloads.go: checks shared by workloads)
//	deploy.go    register the cluster, the namespace, the store, the workloads; export the outputs
//
// The workloads, each declaring its whole entry in a package of its own, which registers it with
// Register (workloads.go: the Workload type and the phases' loops over the entries; their sections
// in Config give the order the phases take them in):
//
//	workloads/<key>/  towers, sentinels, carriers, entrypoint, etcd, elastic, tfcluster,
//	                  monitoring, datain: preset, defaults, checks, the facts other checks need of
//	                  it, deploy, allows, outputs
//	workloads/        imports every entry package: what the program (main.go) and every test that
//	                  loads a stack import to have them registered
//
// The clouds, each declaring its whole entry in a package of its own, which registers it with
// RegisterCloud (cloud.go: the Cloud type, its Store, and the registry; the stack asks the entry
// of its cloud, CloudEntry, and never names a cloud):
//
//	clouds/<name>/  gcp, aws, azure, existing, simulated: what kind of cluster, its keys'
//	                defaults and checks, catalogue, spot label, fabric, file store, GPU agents,
//	                deploy and kube access
//	clouds/         imports every entry package: what the program and every test that loads a
//	                stack import to have them registered
//
// The features, each in one place with its own defaults, checks and deploy:
//
//	storage.go, storage_cloud.go, storage_existing.go  the shared store, selected once (store)
//	clouds.go, clouds_config.go, clouds_access.go, clouds_recovery.go  what spans the clouds:
//	    the cluster's deploy, the pools' machine checks, API access, pool replacement
//	catalogue.go, machines.go, kubeaccess.go  machine types, uncatalogued shapes, kubectl access
//	fabric.go, gpuagents.go, hostnet.go  the pools' fabric, the GPU agents, the towers' host network
//	security.go  Pod Security and NetworkPolicies; registries.go  private registries
//	runs.go, runas.go  runs, code and env; the user the workloads run as
//	queue.go  the stack's queue; timeouts.go  awaits; guard.go, adopt.go  what must not be replaced or taken
//	fit.go  make fit's throw-away stacks
package stacks
