package etcd

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/isolation"
)

// What the rendezvous store asks of the stack around it: the NetworkPolicy allows its members
// need and the stack output that reaches them. Which workloads are its clients the stack decides.

// Allows are the NetworkPolicy allows of the members: the pods of the components in clients
// (the elastic workers with an etcd backend) and the members themselves reach the client port;
// only the members reach the peer port.
func Allows(clients []string) []isolation.Allow {
	return []isolation.Allow{
		{
			Name: "etcd-clients", Pods: []string{Component}, Ports: []isolation.Port{{Port: ClientPort}},
			From: []isolation.Peer{{Components: append([]string{Component}, clients...)}},
			Why:  "The rendezvous clients (elastic workers with an etcd backend) and the members reach etcd's client port.",
		},
		{
			Name: "etcd-peers", Pods: []string{Component}, Ports: []isolation.Port{{Port: PeerPort}},
			From: []isolation.Peer{{Components: []string{Component}}},
			Why:  "The members reach each other's peer port.",
		},
	}
}

// Outputs are the store's stack outputs: the client endpoint, host:port, as torchrun's
// --rdzv_endpoint wants it.
func Outputs(name, namespace string) pulumi.Map {
	return pulumi.Map{"etcdEndpoint": pulumi.String(ClientEndpoint(name, namespace))}
}
