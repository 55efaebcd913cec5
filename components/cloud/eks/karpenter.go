package eks

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/cloudwatch"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/eks"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/iam"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/sqs"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// Karpenter on EKS (https://karpenter.sh/v1.13/): a pool at zero (Pool.Karpenter) has no managed
// node group, which keeps its size and has no autoscaler; Karpenter makes its nodes when pods
// need them and deletes them once empty. This file is what Karpenter needs on AWS, as its
// "Getting Started with Karpenter" guide sets it up for the pinned version
// (website/content/en/v1.13/getting-started/getting-started-with-karpenter/cloudformation.yaml
// in aws/karpenter-provider-aws, and its step02/step08 scripts):
//   - a role for the nodes it launches (KarpenterNodeRole: the managed node group's policies
//     plus AmazonSSMManagedInstanceCore) and an EKS access entry of type EC2_LINUX for it, so
//     that those nodes may join the cluster (Amazon EKS, "Create access entries",
//     https://docs.aws.amazon.com/eks/latest/userguide/creating-access-entries.html);
//   - a role for the controller, with the guide's controller policies, scoped to this cluster,
//     region, account, node role and queue, given to the controller's service account through EKS
//     Pod Identity (an association for kube-system/karpenter; the agent add-on is the cluster's);
//   - the interruption queue (SQS, named after the cluster, messages kept 300 s, SSE) with its
//     policy, and the EventBridge rules that feed it: Spot interruption warnings, rebalance
//     recommendations, instance state changes, AWS Health events and capacity-reservation
//     interruption warnings, so that Karpenter drains a node before EC2 takes it.
// The Kubernetes side (the chart, one EC2NodeClass and one NodePool per pool) is karpenter_kube.go.

const (
	// KarpenterNamespace and KarpenterServiceAccount: where the chart runs the controller, as the
	// guide installs it (KARPENTER_NAMESPACE=kube-system), and its service account, which the
	// Pod Identity association names.
	KarpenterNamespace      = "kube-system"
	KarpenterServiceAccount = "karpenter"
	// KarpenterNodeRoleSuffix and KarpenterControllerRoleSuffix end the roles' names,
	// <cluster>-knodes and <cluster>-kctrl (within the 8 characters the aws entry leaves).
	KarpenterNodeRoleSuffix       = "-knodes"
	KarpenterControllerRoleSuffix = "-kctrl"
	// InterruptionRetentionSeconds: the guide's queue keeps a message 300 s; an interruption
	// warning is two minutes ahead, so an older one is moot.
	InterruptionRetentionSeconds = 300
	// AccessEntryEC2Linux is the access entry type of a role that Linux nodes assume.
	AccessEntryEC2Linux = "EC2_LINUX"
)

// KarpenterNodePolicies are the node role's managed policies (the guide's KarpenterNodeRole).
var KarpenterNodePolicies = []string{
	"arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
	"arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
	"arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly",
	"arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
}

// InterruptionEvent is one EventBridge rule feeding the interruption queue.
type InterruptionEvent struct {
	Suffix     string // the rule's name is <cluster><Suffix>
	Source     string
	DetailType string
}

// InterruptionEvents are the guide's rules (ScheduledChangeRule, SpotInterruptionRule,
// RebalanceRule, InstanceStateChangeRule, CapacityReservationInterruptionRule).
var InterruptionEvents = []InterruptionEvent{
	{Suffix: "-health", Source: "aws.health", DetailType: "AWS Health Event"},
	{Suffix: "-spot", Source: "aws.ec2", DetailType: "EC2 Spot Instance Interruption Warning"},
	{Suffix: "-rebal", Source: "aws.ec2", DetailType: "EC2 Instance Rebalance Recommendation"},
	{Suffix: "-state", Source: "aws.ec2", DetailType: "EC2 Instance State-change Notification"},
	{Suffix: "-capres", Source: "aws.ec2", DetailType: "EC2 Capacity Reservation Instance Interruption Warning"},
}

// KarpenterAWS is what Karpenter needs on AWS for the cluster.
type KarpenterAWS struct {
	NodeRole        *iam.Role
	ControllerRole  *iam.Role
	Queue           *sqs.Queue
	QueueName       string
	Association     *eks.PodIdentityAssociation
	NodeAccessEntry *eks.AccessEntry
	// Ready is every resource above and their policies, rules and targets: what the controller
	// waits for.
	Ready []pulumi.Resource
}

// KarpenterPools reports whether any pool is Karpenter's.
func KarpenterPools(pools []Pool) bool {
	for _, p := range pools {
		if p.Karpenter {
			return true
		}
	}
	return false
}

// newKarpenterAWS registers the node role and its access entry, the interruption queue and its
// rules, and the controller's role with its Pod Identity association.
func newKarpenterAWS(ctx *pulumi.Context, name string, a *ClusterArgs, cluster *eks.Cluster, parent pulumi.ResourceOption) (*KarpenterAWS, error) {
	k := &KarpenterAWS{QueueName: a.Name}
	nodeRole, nodeAttached, err := newRole(ctx, name+"-knodes", a.Name+KarpenterNodeRoleSuffix,
		TrustPolicy("ec2.amazonaws.com", "sts:AssumeRole"), KarpenterNodePolicies, parent)
	if err != nil {
		return nil, fmt.Errorf("karpenter: %w", err)
	}
	k.NodeRole = nodeRole
	k.Ready = append(k.Ready, nodeAttached...)
	if k.NodeAccessEntry, err = eks.NewAccessEntry(ctx, name+"-knodes", &eks.AccessEntryArgs{
		ClusterName: cluster.Name, PrincipalArn: nodeRole.Arn, Type: pulumi.String(AccessEntryEC2Linux),
	}, parent); err != nil {
		return nil, fmt.Errorf("karpenter: access entry %q: %w", name+"-knodes", err)
	}
	k.Ready = append(k.Ready, k.NodeAccessEntry)

	if k.Queue, err = sqs.NewQueue(ctx, name+"-interruption", RenderInterruptionQueue(a.Name), parent); err != nil {
		return nil, fmt.Errorf("karpenter: queue %q: %w", name+"-interruption", err)
	}
	policy, err := sqs.NewQueuePolicy(ctx, name+"-interruption", &sqs.QueuePolicyArgs{
		QueueUrl: k.Queue.Url,
		Policy:   k.Queue.Arn.ApplyT(InterruptionQueuePolicy).(pulumi.StringOutput),
	}, parent)
	if err != nil {
		return nil, fmt.Errorf("karpenter: queue policy %q: %w", name+"-interruption", err)
	}
	k.Ready = append(k.Ready, k.Queue, policy)
	for _, e := range InterruptionEvents {
		rule, err := cloudwatch.NewEventRule(ctx, name+e.Suffix, RenderInterruptionRule(a.Name, e), parent)
		if err != nil {
			return nil, fmt.Errorf("karpenter: event rule %q: %w", name+e.Suffix, err)
		}
		target, err := cloudwatch.NewEventTarget(ctx, name+e.Suffix, &cloudwatch.EventTargetArgs{
			Rule: rule.Name, Arn: k.Queue.Arn, TargetId: pulumi.String("KarpenterInterruptionQueueTarget"),
		}, parent)
		if err != nil {
			return nil, fmt.Errorf("karpenter: event target %q: %w", name+e.Suffix, err)
		}
		k.Ready = append(k.Ready, rule, target)
	}

	ctrlRole, ctrlAttached, err := newRole(ctx, name+"-kctrl", a.Name+KarpenterControllerRoleSuffix,
		TrustPolicy(podIdentityService, "sts:AssumeRole", "sts:TagSession"), nil, parent)
	if err != nil {
		return nil, fmt.Errorf("karpenter: %w", err)
	}
	k.ControllerRole = ctrlRole
	clusterName, region := a.Name, a.Region
	doc := pulumi.All(cluster.Arn, k.Queue.Arn, nodeRole.Arn).ApplyT(func(v []any) (string, error) {
		partition, account, err := arnAccount(v[0].(string))
		if err != nil {
			return "", err
		}
		return ControllerPolicy(partition, region, account, clusterName, v[1].(string), v[2].(string)), nil
	}).(pulumi.StringOutput)
	inline, err := iam.NewRolePolicy(ctx, name+"-kctrl", &iam.RolePolicyArgs{
		Name: pulumi.String("KarpenterController"), Role: ctrlRole.Name, Policy: doc,
	}, parent)
	if err != nil {
		return nil, fmt.Errorf("karpenter: role policy %q: %w", name+"-kctrl", err)
	}
	if k.Association, err = eks.NewPodIdentityAssociation(ctx, name+"-kctrl", &eks.PodIdentityAssociationArgs{
		ClusterName: cluster.Name, Namespace: pulumi.String(KarpenterNamespace),
		ServiceAccount: pulumi.String(KarpenterServiceAccount), RoleArn: ctrlRole.Arn,
	}, parent); err != nil {
		return nil, fmt.Errorf("karpenter: pod identity association %q: %w", name+"-kctrl", err)
	}
	k.Ready = append(append(k.Ready, ctrlAttached...), inline, k.Association)
	return k, nil
}

// arnAccount is the partition and account of an ARN (arn:<partition>:<service>:<region>:<account>:…).
func arnAccount(arn string) (partition, account string, err error) {
	f := strings.SplitN(arn, ":", 6)
	if len(f) < 6 || f[0] != "arn" || f[4] == "" {
		return "", "", fmt.Errorf("karpenter: %q is not an ARN with an account", arn)
	}
	return f[1], f[4], nil
}

// RenderInterruptionQueue is the interruption queue: named after the cluster (what
// settings.interruptionQueue names), messages kept InterruptionRetentionSeconds, encrypted with
// SQS's own keys.
func RenderInterruptionQueue(cluster string) *sqs.QueueArgs {
	return &sqs.QueueArgs{
		Name:                    pulumi.String(cluster),
		MessageRetentionSeconds: pulumi.Int(InterruptionRetentionSeconds),
		SqsManagedSseEnabled:    pulumi.Bool(true),
	}
}

// RenderInterruptionRule is one EventBridge rule of InterruptionEvents.
func RenderInterruptionRule(cluster string, e InterruptionEvent) *cloudwatch.EventRuleArgs {
	pattern, _ := json.Marshal(map[string][]string{"source": {e.Source}, "detail-type": {e.DetailType}})
	return &cloudwatch.EventRuleArgs{
		Name:         pulumi.String(cluster + e.Suffix),
		Description:  pulumi.String("Karpenter of " + cluster + ": " + e.DetailType),
		EventPattern: pulumi.String(string(pattern)),
	}
}

// InterruptionQueuePolicy is the queue's policy: EventBridge (and SQS) may send to it, and
// nothing reaches it but over TLS (the guide's EC2InterruptionPolicy with DenyHTTP).
func InterruptionQueuePolicy(queueArn string) string {
	b, _ := json.Marshal(map[string]any{
		"Version": "2012-10-17",
		"Id":      "EC2InterruptionPolicy",
		"Statement": []any{
			map[string]any{
				"Effect":    "Allow",
				"Principal": map[string]any{"Service": []string{"events.amazonaws.com", "sqs.amazonaws.com"}},
				"Action":    "sqs:SendMessage",
				"Resource":  queueArn,
			},
			map[string]any{
				"Sid": "DenyHTTP", "Effect": "Deny", "Action": "sqs:*", "Resource": queueArn, "Principal": "*",
				"Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": false}},
			},
		},
	})
	return string(b)
}

// ControllerPolicy is the controller's policy: the guide's NodeLifecyclePolicy,
// IAMIntegrationPolicy, EKSIntegrationPolicy, InterruptionPolicy and ResourceDiscoveryPolicy in
// one document, for this cluster in this region and account. It launches, tags and terminates
// only instances, volumes, interfaces and launch templates tagged as this cluster's and a
// NodePool's, passes only the node role, manages only instance profiles tagged as this
// cluster's in this region, reads only this queue and describes only this cluster. (The
// ZonalShiftPolicy is left out: settings.enableZonalShift stays off.)
func ControllerPolicy(partition, region, account, cluster, queueArn, nodeRoleArn string) string {
	ec2 := func(resource string) string {
		return fmt.Sprintf("arn:%s:ec2:%s:%s", partition, region, resource)
	}
	owned := "aws:RequestTag/kubernetes.io/cluster/" + cluster
	ownedRes := "aws:ResourceTag/kubernetes.io/cluster/" + cluster
	tagged := []string{
		ec2("*:fleet/*"), ec2("*:instance/*"), ec2("*:volume/*"), ec2("*:network-interface/*"),
		ec2("*:launch-template/*"), ec2("*:spot-instances-request/*"),
	}
	profiles := fmt.Sprintf("arn:%s:iam::%s:instance-profile/*", partition, account)
	stmt := func(sid string, resource any, action any, condition map[string]any) map[string]any {
		s := map[string]any{"Sid": sid, "Effect": "Allow", "Resource": resource, "Action": action}
		if condition != nil {
			s["Condition"] = condition
		}
		return s
	}
	statements := []any{
		// NodeLifecyclePolicy
		stmt("AllowScopedEC2InstanceAccessActions", []string{
			ec2(":image/*"), ec2(":snapshot/*"), ec2("*:security-group/*"), ec2("*:subnet/*"),
			ec2("*:capacity-reservation/*"), ec2("*:placement-group/*"),
		}, []string{"ec2:RunInstances", "ec2:CreateFleet"}, nil),
		stmt("AllowScopedEC2LaunchTemplateAccessActions", ec2("*:launch-template/*"), []string{"ec2:RunInstances", "ec2:CreateFleet"},
			map[string]any{"StringEquals": map[string]any{ownedRes: "owned"}, "StringLike": map[string]any{"aws:ResourceTag/karpenter.sh/nodepool": "*"}}),
		stmt("AllowScopedEC2InstanceActionsWithTags", tagged, []string{"ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"},
			map[string]any{
				"StringEquals": map[string]any{owned: "owned", "aws:RequestTag/eks:eks-cluster-name": cluster},
				"StringLike":   map[string]any{"aws:RequestTag/karpenter.sh/nodepool": "*"},
			}),
		stmt("AllowScopedResourceCreationTagging", tagged, "ec2:CreateTags", map[string]any{
			"StringEquals": map[string]any{owned: "owned", "aws:RequestTag/eks:eks-cluster-name": cluster,
				"ec2:CreateAction": []string{"RunInstances", "CreateFleet", "CreateLaunchTemplate"}},
			"StringLike": map[string]any{"aws:RequestTag/karpenter.sh/nodepool": "*"},
		}),
		stmt("AllowScopedResourceTagging", ec2("*:instance/*"), "ec2:CreateTags", map[string]any{
			"StringEquals":              map[string]any{ownedRes: "owned"},
			"StringLike":                map[string]any{"aws:ResourceTag/karpenter.sh/nodepool": "*"},
			"StringEqualsIfExists":      map[string]any{"aws:RequestTag/eks:eks-cluster-name": cluster},
			"ForAllValues:StringEquals": map[string]any{"aws:TagKeys": []string{"eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"}},
		}),
		stmt("AllowScopedDeletion", []string{ec2("*:instance/*"), ec2("*:launch-template/*")},
			[]string{"ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"},
			map[string]any{"StringEquals": map[string]any{ownedRes: "owned"}, "StringLike": map[string]any{"aws:ResourceTag/karpenter.sh/nodepool": "*"}}),
		// IAMIntegrationPolicy
		stmt("AllowPassingInstanceRole", nodeRoleArn, "iam:PassRole",
			map[string]any{"StringEquals": map[string]any{"iam:PassedToService": []string{"ec2.amazonaws.com", "ec2.amazonaws.com.cn"}}}),
		stmt("AllowScopedInstanceProfileCreationActions", profiles, []string{"iam:CreateInstanceProfile"}, map[string]any{
			"StringEquals": map[string]any{owned: "owned", "aws:RequestTag/eks:eks-cluster-name": cluster, "aws:RequestTag/topology.kubernetes.io/region": region},
			"StringLike":   map[string]any{"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"},
		}),
		stmt("AllowScopedInstanceProfileTagActions", profiles, []string{"iam:TagInstanceProfile"}, map[string]any{
			"StringEquals": map[string]any{ownedRes: "owned", "aws:ResourceTag/topology.kubernetes.io/region": region,
				owned: "owned", "aws:RequestTag/eks:eks-cluster-name": cluster, "aws:RequestTag/topology.kubernetes.io/region": region},
			"StringLike": map[string]any{"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*", "aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"},
		}),
		stmt("AllowScopedInstanceProfileActions", profiles, []string{"iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile"},
			map[string]any{
				"StringEquals": map[string]any{ownedRes: "owned", "aws:ResourceTag/topology.kubernetes.io/region": region},
				"StringLike":   map[string]any{"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*"},
			}),
		// EKSIntegrationPolicy
		stmt("AllowAPIServerEndpointDiscovery", fmt.Sprintf("arn:%s:eks:%s:%s:cluster/%s", partition, region, account, cluster), "eks:DescribeCluster", nil),
		// InterruptionPolicy
		stmt("AllowInterruptionQueueActions", queueArn, []string{"sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"}, nil),
		// ResourceDiscoveryPolicy
		stmt("AllowRegionalReadActions", "*", []string{
			"ec2:DescribeCapacityReservations", "ec2:DescribeImages", "ec2:DescribeInstances", "ec2:DescribeInstanceStatus",
			"ec2:DescribeInstanceTypeOfferings", "ec2:DescribeInstanceTypes", "ec2:DescribeLaunchTemplates",
			"ec2:DescribePlacementGroups", "ec2:DescribeSecurityGroups", "ec2:DescribeSpotPriceHistory", "ec2:DescribeSubnets",
		}, map[string]any{"StringEquals": map[string]any{"aws:RequestedRegion": region}}),
		stmt("AllowSSMReadActions", fmt.Sprintf("arn:%s:ssm:%s::parameter/aws/service/*", partition, region), "ssm:GetParameter", nil),
		stmt("AllowPricingReadActions", "*", "pricing:GetProducts", nil),
		stmt("AllowUnscopedInstanceProfileListAction", "*", "iam:ListInstanceProfiles", nil),
		stmt("AllowInstanceProfileReadActions", profiles, "iam:GetInstanceProfile", nil),
	}
	b, _ := json.Marshal(map[string]any{"Version": "2012-10-17", "Statement": statements})
	return string(b)
}
