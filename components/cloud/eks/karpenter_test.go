package eks

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestControllerPolicyFits: the controller's policy is one inline role policy, and IAM refuses a
// role's inline policies above 10,240 characters, whitespace not counted
// (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html, "IAM and AWS STS
// character limits": "The size of each inline policy cannot exceed ... 10,240 characters for a
// role"). Checked at the longest names the aws entry allows: a 56-character cluster name and its
// queue and roles.
func TestControllerPolicyFits(t *testing.T) {
	cluster := strings.Repeat("c", 56)
	doc := ControllerPolicy("aws-us-gov", "ap-southeast-4", "123456789012", cluster,
		"arn:aws-us-gov:sqs:ap-southeast-4:123456789012:"+cluster, "arn:aws-us-gov:iam::123456789012:role/"+cluster+KarpenterNodeRoleSuffix)
	if !json.Valid([]byte(doc)) {
		t.Fatalf("not JSON: %s", doc)
	}
	n := len(strings.Join(strings.Fields(doc), ""))
	if n > 10240 {
		t.Errorf("controller policy is %d characters; IAM allows 10,240 for a role's inline policies", n)
	}
	t.Logf("controller policy: %d characters of 10,240", n)
}

// TestARNAccount: the partition and account come from the cluster's ARN, in any partition.
func TestARNAccount(t *testing.T) {
	p, a, err := arnAccount("arn:aws-cn:eks:cn-north-1:123456789012:cluster/x")
	if err != nil || p != "aws-cn" || a != "123456789012" {
		t.Errorf("arnAccount = %q, %q, %v; want aws-cn, 123456789012", p, a, err)
	}
	if _, _, err := arnAccount("arn:aws:s3:::bucket"); err == nil {
		t.Error("an ARN without an account was accepted")
	}
}
