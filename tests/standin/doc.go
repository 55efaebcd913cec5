// Package standin is a stand-in for the real Pulumi Kubernetes resource provider
// (pulumi-resource-kubernetes v4), written for Kolotoc's test bed only.
//
// # What it is, and where it is used
//
// The real provider plugin cannot be downloaded on the machines that run Kolotoc's
// end-to-end suite, so the suite builds this package into a binary named
// pulumi-resource-kubernetes (see cmd/pulumi-resource-kubernetes) and puts it on the
// PATH of the real Pulumi CLI. It is used ONLY where the real plugin is not installed;
// wherever the CLI can obtain the real provider, the real one is used and nothing here
// matters. It is not shipped, and no stack outside the test bed should ever run it.
//
// It speaks the provider gRPC protocol (pulumirpc.ResourceProviderServer), reports
// version 4.27.0, and applies objects to a real API server (a local kwok cluster).
// Its behaviour follows the real provider's source (provider/pkg/provider,
// provider/pkg/await, provider/pkg/metadata, provider/pkg/ssa in pulumi-kubernetes),
// re-implemented here, so that a bug the real provider would show also shows here.
//
// # What it implements
//
//   - Provider config: kubeconfig (path, YAML or JSON contents, or an object),
//     context, cluster, namespace, enableServerSideApply (accepted; SSA is always on),
//     deleteUnreachable, skipUpdateUnreachable, enableConfigMapMutable,
//     enableSecretMutable, kubeClientSettings (burst, qps, timeout), strictMode,
//     clusterIdentifier. Helm, YAML-rendering and other keys are accepted and ignored,
//     except renderYamlToDirectory, which CheckConfig rejects (not implemented).
//     An unknown or unparsable kubeconfig marks the cluster unreachable, as the real
//     provider does, so a preview with unknown provider inputs works without a
//     cluster. DiffConfig replaces the provider when the active cluster changes or a
//     kubeconfig/context/cluster value is unknown, and honours clusterIdentifier.
//   - Any resource token kubernetes:<group>/<version>:<Kind> (core group as core/v1),
//     resolved through API discovery (RESTMapper); namespaced vs cluster-scoped from
//     discovery, or from a built-in table when the cluster is unreachable.
//   - Check: normalisation through the client-go scheme (as the real provider does),
//     default namespace, autonaming (<resource name>-<8 hex>, pulumi.com/autonamed,
//     engine autonaming options), kept-old autonames, secretness carried over.
//   - Diff: the real v4 algorithm: the last live state pruned to the shape of the old
//     inputs is compared with the new inputs; replacement is decided by the real
//     provider's table of replace-on-change fields (metadata.name/namespace, Job
//     spec.template, StatefulSet selector/serviceName/volumeClaimTemplates/...,
//     ConfigMap and Secret data unless made mutable, ...), with DeleteBeforeReplace
//     under the real provider's rule. The server-side dry-run apply happens where the
//     real provider does it: in Create/Update during preview.
//   - Create/Update: server-side apply (PATCH application/apply-patch+yaml) with
//     fieldValidation=Strict, a per-resource field manager pulumi-kubernetes-<hex>
//     kept in state (or pulumi.com/patchFieldManager), force only where the real
//     provider forces (pulumi.com/patchForce, PULUMI_K8S_ENABLE_PATCH_FORCE, previews);
//     before an update, fields owned by kubectl / client-side-apply managers are taken
//     over as the real provider does, so that `kubectl scale` drift can be reverted.
//   - Read: GET of the live object (refresh shows drift) plus the real provider's read
//     readiness checks; a missing object is reported as deleted.
//   - Delete: propagation Foreground by default or pulumi.com/deletionPropagationPolicy,
//     then wait until the object is gone (bounded by the resource timeout, 10 minutes by
//     default): one read, then a watch of its name from that read's resourceVersion, done
//     at the deletion event or when another object (another UID) takes the name;
//     pulumi.com/skipAwait skips that wait only for the kinds the real provider allows.
//   - pulumi.com/waitFor (the real provider's ReadyCondition): "condition=<Type>[=<Status>]",
//     or a JSON array of such expressions, replaces the built-in wait of any kind, kubectl's
//     rule included (a condition reported for an older generation does not count). The
//     test bed's SimulatedNodePools are awaited so. "jsonpath=" expressions, which the real
//     provider also takes, are refused with an error saying the stand-in lacks them.
//   - Readiness waits (skipped with pulumi.com/skipAwait: "true"; bounded by the
//     resource's customTimeouts, then pulumi.com/timeoutSeconds, then 10 minutes):
//     Deployment (controller reconciled, new ReplicaSet available, referenced PVCs
//     bound), StatefulSet (observed, all replicas ready and current, revision rolled),
//     DaemonSet (observed, desired == current == updated == available == ready),
//     Job (started and Complete; fails at once on a Failed condition), Service
//     (non-headless, non-ExternalName: EndpointSlices target something and settled;
//     LoadBalancer: ingress assigned), PersistentVolumeClaim (Bound, or Pending under
//     WaitForFirstConsumer), PersistentVolume (Available/Bound), Pod (Ready), Namespace
//     (Active), service-account-token Secrets (data filled). While waiting it reports
//     progress, and on failure it says why: Pod conditions (e.g. the scheduler's
//     "0/3 nodes are available: 3 Insufficient nvidia.com/gpu"), container waiting and
//     termination reasons, and the workload's Warning events.
//   - How it waits: by watching, as the real provider does with informers (watch.go). The
//     object is watched from the resourceVersion its apply returned, and each list readiness
//     depends on (a Deployment's ReplicaSets and claims, a Service's EndpointSlices, a
//     claim's StorageClass) is listed once and watched from the list's resourceVersion.
//     Readiness is evaluated again on every event, so a change is seen as soon as the API
//     server sends it. A watch that ends is started again from the last resourceVersion
//     seen; one whose version expired (410 Gone), or that fails, is preceded by a new list.
//     Unlike the real provider, each await has its own narrow watches (by name or label
//     selector) instead of namespace-wide informers shared by all awaits, and the Pods and
//     events shown while waiting are listed when shown (at most every 10 s), not watched.
//   - Outputs: the live object, plus __inputs, __initialApiVersion and __fieldManager,
//     as the real provider checkpoints them. Every value that arrived as a secret stays
//     a secret in outputs and in __inputs; a core/v1 Secret's data and stringData are
//     always secret. Property values are never logged.
//   - GetPluginInfo (4.27.0), GetSchema (a minimal schema), CheckConfig, DiffConfig,
//     Configure, Check, Diff, Create, Read, Update, Delete, Cancel, Attach, GetMapping.
//
// # What it does not implement
//
// No Helm (Chart, Release), no yaml/kustomize invokes or ConfigFile/ConfigGroup
// components, no Patch resources (<Kind>Patch), no List resources, no client-side
// apply mode, no renderYamlToDirectory, no OpenAPI schema validation in Check (the API
// server's strict validation reports such errors at preview or update instead), no
// CRD-specific awaiters (a custom resource is awaited only through pulumi.com/waitFor's
// condition= expressions; jsonpath= ones are refused), no Ingress awaiter, no
// pulumi.com/replaceUnready, and the field-manager takeover for ignoreChanges is the
// simpler "keep the live value" rule.
package standin
