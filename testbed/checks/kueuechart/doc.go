// Package kueuechart checks Kueue's cloud install as Kolotoc renders it: upstream's chart at the
// version Kolotoc pins, rendered by Helm's engine exactly as the Kubernetes provider's
// `kubernetes:helm:template` invoke does (Render), then every object Kolotoc registers from it,
// after its values and transformations (components/queue/chart.go), checked under Pulumi's mocks.
package kueuechart
