package checks

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The GitHub workflows run with the state passphrase, the Pulumi token and the clouds' OIDC roles
// (security review, issue 12). These tests hold the rules that keep those out of code nobody
// reviewed, whoever edits the workflow files next (docs/operating/ci-previews.md "Reviewing
// changes: previews in CI"):
//   - every action is pinned by a full commit SHA (a tag can be moved to other code);
//   - a job that reads a secret or can mint an OIDC token names a GitHub environment, where the
//     secrets live and whose protection rules (reviewers, branches) GitHub enforces;
//   - a pull request's jobs get credentials only in a `preview-<stack>` environment, never from
//     the repository, and pull_request_target (which runs with the base branch's secrets) is
//     not used at all.

// workflowsDir: the workflows, relative to this package.
const workflowsDir = "../../.github/workflows"

// previewEnvPrefix: the environments a pull request's jobs may run in. The deploy environments
// (`prod`, …) are for the default branch only.
const previewEnvPrefix = "preview-"

type workflowFile struct {
	path string
	On   yaml.Node            `yaml:"on"`
	Env  yaml.Node            `yaml:"env"`
	Perm yaml.Node            `yaml:"permissions"`
	Jobs map[string]yaml.Node `yaml:"jobs"`
}

type workflowJob struct {
	Uses        string      `yaml:"uses"` // a reusable workflow
	Secrets     yaml.Node   `yaml:"secrets"`
	Environment yaml.Node   `yaml:"environment"`
	Perm        yaml.Node   `yaml:"permissions"`
	Timeout     yaml.Node   `yaml:"timeout-minutes"`
	Steps       []yaml.Node `yaml:"steps"`
}

func loadWorkflows(t *testing.T) []workflowFile {
	t.Helper()
	var paths []string
	for _, pattern := range []string{"*.yml", "*.yaml"} {
		m, err := filepath.Glob(filepath.Join(workflowsDir, pattern))
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, m...)
	}
	sort.Strings(paths)
	if len(paths) == 0 {
		t.Fatalf("no workflows under %s", workflowsDir)
	}
	var wfs []workflowFile
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		wf, err := parseWorkflow(filepath.Join(".github/workflows", filepath.Base(p)), data)
		if err != nil {
			t.Fatal(err)
		}
		wfs = append(wfs, wf)
	}
	return wfs
}

func parseWorkflow(path string, data []byte) (workflowFile, error) {
	wf := workflowFile{path: path}
	if err := yaml.Unmarshal(data, &wf); err != nil {
		return wf, fmt.Errorf("%s: %w", path, err)
	}
	for _, name := range wf.jobNames() {
		if _, err := wf.job(name); err != nil {
			return wf, err
		}
	}
	return wf, nil
}

// jobNames: the workflow's jobs in a stable order.
func (wf workflowFile) jobNames() []string {
	names := make([]string, 0, len(wf.Jobs))
	for n := range wf.Jobs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (wf workflowFile) job(name string) (workflowJob, error) {
	node := wf.Jobs[name]
	var j workflowJob
	if err := node.Decode(&j); err != nil {
		return j, fmt.Errorf("%s: job %s: %w", wf.path, name, err)
	}
	return j, nil
}

// triggers: the events the workflow runs on (`on: x`, `on: [x, y]` or `on: {x: …}`).
func (wf workflowFile) triggers() map[string]bool {
	ev := map[string]bool{}
	switch wf.On.Kind {
	case yaml.ScalarNode:
		ev[wf.On.Value] = true
	case yaml.SequenceNode:
		for _, n := range wf.On.Content {
			ev[n.Value] = true
		}
	case yaml.MappingNode:
		for i := 0; i < len(wf.On.Content); i += 2 {
			ev[wf.On.Content[i].Value] = true
		}
	}
	return ev
}

// pinned: `uses: owner/repo[/path]@<40 hex>`, a local action (./…) or a docker image by digest.
var pinned = regexp.MustCompile(`^(\./.*|docker://[^@]+@sha256:[0-9a-f]{64}|[^@\s]+@[0-9a-f]{40})$`)

// usesValues: every `uses:` value under node (steps and reusable-workflow jobs), with its line.
func usesValues(node *yaml.Node, out map[int]string) {
	if node.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(node.Content); i += 2 {
			k, v := node.Content[i], node.Content[i+1]
			if k.Value == "uses" && v.Kind == yaml.ScalarNode {
				out[v.Line] = v.Value
			}
		}
	}
	for _, c := range node.Content {
		usesValues(c, out)
	}
}

// unpinnedUses: a tag (v4) can be moved by whoever controls the action's repository, and the next
// run executes the new code with this repository's credentials; a commit SHA cannot. The version
// belongs in a trailing comment (`@<sha> # v4.2.2`).
func unpinnedUses(wf workflowFile) []string {
	var problems []string
	for _, name := range wf.jobNames() {
		node := wf.Jobs[name]
		found := map[int]string{}
		usesValues(&node, found)
		lines := make([]int, 0, len(found))
		for l := range found {
			lines = append(lines, l)
		}
		sort.Ints(lines)
		for _, l := range lines {
			if !pinned.MatchString(found[l]) {
				problems = append(problems, fmt.Sprintf("%s:%d: job %s: uses %q: pin it by a full 40-hex commit SHA (`@<sha> # vX.Y.Z`)", wf.path, l, name, found[l]))
			}
		}
	}
	return problems
}

// expression and secretRef: an expression that reads the secrets context (secrets.X,
// secrets['X'], toJSON(secrets)); secretRef's second group is X when it is named.
var (
	expression = regexp.MustCompile(`\$\{\{(?s:.*?)\}\}`)
	secretRef  = regexp.MustCompile(`\bsecrets\b(\s*\.\s*([A-Za-z_][A-Za-z0-9_-]*))?`)
)

// secretsRead: the secrets a piece of workflow YAML reads, other than GITHUB_TOKEN (the job's
// own token, scoped by its permissions). "*" stands for the whole context or a computed name.
func secretsRead(node *yaml.Node) []string {
	var out []string
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.ScalarNode {
			for _, e := range expression.FindAllString(n.Value, -1) {
				for _, m := range secretRef.FindAllStringSubmatch(e, -1) {
					switch {
					case m[2] == "":
						out = append(out, "*")
					case !strings.EqualFold(m[2], "GITHUB_TOKEN"):
						out = append(out, m[2])
					}
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(node)
	return out
}

// mintsOIDC: permissions that include `id-token: write` (or write-all).
func mintsOIDC(perm *yaml.Node) bool {
	switch perm.Kind {
	case yaml.ScalarNode:
		return perm.Value == "write-all"
	case yaml.MappingNode:
		for i := 0; i+1 < len(perm.Content); i += 2 {
			if perm.Content[i].Value == "id-token" && perm.Content[i+1].Value == "write" {
				return true
			}
		}
	}
	return false
}

// environmentName: the job's `environment:` (a name or {name: …}), "" when it has none.
func environmentName(env *yaml.Node) string {
	switch env.Kind {
	case yaml.ScalarNode:
		return env.Value
	case yaml.MappingNode:
		for i := 0; i+1 < len(env.Content); i += 2 {
			if env.Content[i].Value == "name" {
				return env.Content[i+1].Value
			}
		}
	}
	return ""
}

// jobCredentials: what a job can authenticate with: the secrets it reads (its own, the workflow's
// env, `secrets: inherit` to a reusable workflow) and whether it can mint an OIDC token (its own
// permissions, or the workflow's when it has none).
func (wf workflowFile) jobCredentials(name string) (secrets []string, oidc bool, env string) {
	node := wf.Jobs[name]
	j, _ := wf.job(name) // decoded once already by parseWorkflow
	secrets = append(secretsRead(&node), secretsRead(&wf.Env)...)
	if j.Uses != "" && j.Secrets.Kind == yaml.ScalarNode && j.Secrets.Value == "inherit" {
		secrets = append(secrets, "inherit")
	}
	perm := &j.Perm
	if perm.Kind == 0 {
		perm = &wf.Perm
	}
	return secrets, mintsOIDC(perm), environmentName(&j.Environment)
}

// credentialsOutsideEnvironments: a job receives an environment's secrets, and an OIDC token whose
// subject is `repo:<owner>/<repo>:environment:<name>`, only by naming the environment, and GitHub
// applies the environment's protection rules to it whoever wrote the workflow. A job that reads a
// secret or mints a token without one reads repository-level secrets or presents a subject
// (`…:pull_request`, `…:ref:…`) the clouds must not trust.
func credentialsOutsideEnvironments(wf workflowFile) []string {
	var problems []string
	for _, name := range wf.jobNames() {
		secrets, oidc, env := wf.jobCredentials(name)
		if env != "" {
			continue
		}
		if len(secrets) > 0 {
			problems = append(problems, fmt.Sprintf("%s: job %s reads secrets %v without an environment: move them into a GitHub environment and name it (`environment:`)", wf.path, name, secrets))
		}
		if oidc {
			problems = append(problems, fmt.Sprintf("%s: job %s has id-token: write without an environment: its OIDC subject is not bound to an environment's protection rules", wf.path, name))
		}
	}
	return problems
}

// pullRequestCredentials: a pull request runs its own code and its own copy of the workflow. Its
// jobs may hold credentials only inside a `preview-<stack>` environment, whose required reviewers
// approve before the job starts; a secret read outside one is a repository secret handed to any
// branch. pull_request_target runs the base branch's workflow with its secrets next to a pull
// request's code: not used here.
func pullRequestCredentials(wf workflowFile) []string {
	var problems []string
	ev := wf.triggers()
	if ev["pull_request_target"] {
		problems = append(problems, fmt.Sprintf("%s: on pull_request_target: runs with the base repository's secrets and write token; use pull_request with a preview environment", wf.path))
	}
	if !ev["pull_request"] && !ev["pull_request_target"] {
		return problems
	}
	for _, name := range wf.jobNames() {
		secrets, _, env := wf.jobCredentials(name)
		switch {
		case env == "" && len(secrets) > 0:
			problems = append(problems, fmt.Sprintf("%s: job %s runs on pull requests and reads secrets %v outside an environment (repository secrets): any branch can print them", wf.path, name, secrets))
		case env != "" && !strings.HasPrefix(env, previewEnvPrefix):
			problems = append(problems, fmt.Sprintf("%s: job %s runs on pull requests in environment %q: only %s<stack> environments (read-only identities, required reviewers) are for pull requests", wf.path, name, env, previewEnvPrefix))
		}
	}
	return problems
}

// TestWorkflowActionsPinned: every `uses:` of .github/workflows is a commit SHA.
func TestWorkflowActionsPinned(t *testing.T) {
	for _, wf := range loadWorkflows(t) {
		for _, p := range unpinnedUses(wf) {
			t.Error(p)
		}
	}
}

// TestWorkflowCredentialsInEnvironments: every job of .github/workflows that reads a secret or
// mints an OIDC token names an environment.
func TestWorkflowCredentialsInEnvironments(t *testing.T) {
	for _, wf := range loadWorkflows(t) {
		for _, p := range credentialsOutsideEnvironments(wf) {
			t.Error(p)
		}
	}
}

// TestPullRequestJobsUsePreviewEnvironments: no pull_request_target, and a pull request's jobs
// hold credentials only in preview-<stack> environments.
func TestPullRequestJobsUsePreviewEnvironments(t *testing.T) {
	for _, wf := range loadWorkflows(t) {
		for _, p := range pullRequestCredentials(wf) {
			t.Error(p)
		}
	}
}

// TestWorkflowRulesCatch: the rules above on workflows written to break them, including the ways
// a pull request could hide a secret from a simpler check.
func TestWorkflowRulesCatch(t *testing.T) {
	const sha = "11d5960a326750d5838078e36cf38b85af677262"
	checkRules(t, []ruleCase{
		{"tag", "on: push\njobs:\n  a:\n    steps:\n      - uses: actions/checkout@v4\n", unpinnedUses, 1},
		{"short sha", "on: push\njobs:\n  a:\n    steps:\n      - uses: actions/checkout@11d5960\n", unpinnedUses, 1},
		{"branch", "on: push\njobs:\n  a:\n    uses: o/r/.github/workflows/x.yml@main\n", unpinnedUses, 1},
		{"docker tag", "on: push\njobs:\n  a:\n    steps:\n      - uses: docker://alpine:3\n", unpinnedUses, 1},
		{"sha and local", "on: push\njobs:\n  a:\n    steps:\n      - uses: actions/checkout@" + sha + " # v4.4.0\n      - uses: ./.github/actions/x\n", unpinnedUses, 0},
		{"secret in run", "on: push\njobs:\n  a:\n    steps:\n      - run: echo ${{ secrets.X }}\n", credentialsOutsideEnvironments, 1},
		{"secret by index", "on: push\njobs:\n  a:\n    steps:\n      - run: echo ${{ secrets['X'] }}\n", credentialsOutsideEnvironments, 1},
		{"all secrets", "on: push\njobs:\n  a:\n    steps:\n      - run: echo '${{ toJSON(secrets) }}'\n", credentialsOutsideEnvironments, 1},
		{"workflow env", "on: push\nenv:\n  P: ${{ secrets.P }}\njobs:\n  a:\n    steps:\n      - run: env\n", credentialsOutsideEnvironments, 1},
		{"inherit", "on: push\njobs:\n  a:\n    uses: o/r/.github/workflows/x.yml@" + sha + "\n    secrets: inherit\n", credentialsOutsideEnvironments, 1},
		{"oidc from workflow", "on: push\npermissions:\n  id-token: write\njobs:\n  a:\n    steps:\n      - run: true\n", credentialsOutsideEnvironments, 1},
		{"write-all", "on: push\njobs:\n  a:\n    permissions: write-all\n    steps:\n      - run: true\n", credentialsOutsideEnvironments, 1},
		{"job narrows workflow", "on: push\npermissions:\n  id-token: write\njobs:\n  a:\n    permissions:\n      contents: read\n    steps:\n      - run: true\n", credentialsOutsideEnvironments, 0},
		{"github token", "on: push\njobs:\n  a:\n    steps:\n      - run: echo ${{ secrets.GITHUB_TOKEN }}\n", credentialsOutsideEnvironments, 0},
		{"in environment", "on: push\njobs:\n  a:\n    environment:\n      name: prod\n    permissions:\n      id-token: write\n    steps:\n      - run: echo ${{ secrets.X }}\n", credentialsOutsideEnvironments, 0},
		{"pr repository secret", "on: [pull_request]\njobs:\n  a:\n    steps:\n      - run: echo ${{ secrets.X }}\n", pullRequestCredentials, 1},
		{"pr deploy environment", "on:\n  pull_request:\njobs:\n  a:\n    environment: prod\n    steps:\n      - run: echo ${{ secrets.X }}\n", pullRequestCredentials, 1},
		{"pr preview environment", "on:\n  pull_request:\njobs:\n  a:\n    environment: preview-${{ matrix.stack }}\n    steps:\n      - run: echo ${{ secrets.X }}\n", pullRequestCredentials, 0},
		{"pull_request_target", "on: pull_request_target\njobs:\n  a:\n    steps:\n      - run: true\n", pullRequestCredentials, 1},
		{"push is not a pr", "on: push\njobs:\n  a:\n    environment: prod\n    steps:\n      - run: echo ${{ secrets.X }}\n", pullRequestCredentials, 0},
	})
}

// The preview identity split (issue 30; docs/operating/ci-previews.md "What a preview can still
// read"): a pull request's program runs on the stack's preview copy, with the copy's passphrase
// only, and never next to the job's GitHub token; the deploy refreshes the copy after each `pulumi
// up`.

// stepInfo: what a step runs: its `run:` script, or the action it uses and that action's inputs.
type stepInfo struct {
	Run  string            `yaml:"run"`
	Uses string            `yaml:"uses"`
	With map[string]string `yaml:"with"`
	Env  map[string]string `yaml:"env"`
}

func (wf workflowFile) steps(name string) []stepInfo {
	j, _ := wf.job(name)
	out := make([]stepInfo, 0, len(j.Steps))
	for _, n := range j.Steps {
		var s stepInfo
		_ = n.Decode(&s)
		out = append(out, s)
	}
	return out
}

// runsProgram: a step that starts the Pulumi program (the CLI's preview, up, destroy or refresh,
// or pulumi/actions with a command).
var pulumiRun = regexp.MustCompile(`\bpulumi\s+(preview|up|update|destroy|refresh)\b`)

func (s stepInfo) runsProgram() bool {
	if strings.HasPrefix(s.Uses, "pulumi/actions@") {
		return s.With["command"] != ""
	}
	return pulumiRun.MatchString(s.Run)
}

// writePermissions: the write scopes of a job's permissions other than id-token.
func writePermissions(perm *yaml.Node) []string {
	var out []string
	switch perm.Kind {
	case yaml.ScalarNode:
		if perm.Value == "write-all" {
			out = append(out, "write-all")
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(perm.Content); i += 2 {
			if perm.Content[i].Value != "id-token" && perm.Content[i+1].Value == "write" {
				out = append(out, perm.Content[i].Value)
			}
		}
	}
	return out
}

var (
	githubToken  = regexp.MustCompile(`\bgithub\s*\.\s*token\b|\bsecrets\s*\.\s*GITHUB_TOKEN\b`)
	previewStack = regexp.MustCompile(`--stack[ =]+"?[^" ]*-preview"?`)
)

// previewProgramCredentials: in a pull request's workflow, a job that runs the program must not
// hand it the job's GitHub token (an action's inputs, pulumi/actions' github-token among them,
// reach every process the action starts; a token with write scopes can push or comment as the
// repository), must run it on a preview copy (`--stack <stack>-preview`, prepared by
// `previewstack prepare`), and must never deploy.
func previewProgramCredentials(wf workflowFile) []string {
	if !wf.triggers()["pull_request"] {
		return nil
	}
	var problems []string
	for _, name := range wf.jobNames() {
		runs, prepared := false, false
		for _, s := range wf.steps(name) {
			if strings.Contains(s.Run, "previewstack prepare") {
				prepared = true
			}
			if !s.runsProgram() {
				continue
			}
			runs = true
			switch {
			case s.Uses != "":
				problems = append(problems, fmt.Sprintf("%s: job %s runs the program through %s: its github-token input reaches the program; install the CLI with it and run `pulumi preview` in a run step", wf.path, name, s.Uses))
			case regexp.MustCompile(`\bpulumi\s+(up|update|destroy|refresh)\b`).MatchString(s.Run):
				problems = append(problems, fmt.Sprintf("%s: job %s changes a stack on a pull request", wf.path, name))
			case !previewStack.MatchString(s.Run) || !prepared:
				problems = append(problems, fmt.Sprintf("%s: job %s previews a stack itself: preview its copy, `previewstack prepare --stack S` then `pulumi preview --stack S-preview`", wf.path, name))
			}
		}
		if !runs {
			continue
		}
		node := wf.Jobs[name]
		j, _ := wf.job(name)
		perm := &j.Perm
		if perm.Kind == 0 {
			perm = &wf.Perm
		}
		if w := writePermissions(perm); len(w) > 0 {
			problems = append(problems, fmt.Sprintf("%s: job %s runs the program with a token that writes %v: post results from a job that runs no pull-request code", wf.path, name, w))
		}
		found := false
		var walk func(n *yaml.Node)
		walk = func(n *yaml.Node) {
			if n.Kind == yaml.ScalarNode && githubToken.MatchString(n.Value) {
				found = true
			}
			for _, c := range n.Content {
				walk(c)
			}
		}
		walk(&node)
		if found {
			problems = append(problems, fmt.Sprintf("%s: job %s runs the program and passes the job's GitHub token", wf.path, name))
		}
	}
	return problems
}

// deployRefreshesPreviewCopy: a job that deploys (pulumi up) refreshes the stack's preview copy
// afterwards, or pull requests would preview an old copy.
func deployRefreshesPreviewCopy(wf workflowFile) []string {
	var problems []string
	for _, name := range wf.jobNames() {
		up := false
		for _, s := range wf.steps(name) {
			if s.With["command"] == "up" || regexp.MustCompile(`\bpulumi\s+up\b`).MatchString(s.Run) {
				up = true
			}
			if up && strings.Contains(s.Run, "previewstack copy") {
				up = false
			}
		}
		if up {
			problems = append(problems, fmt.Sprintf("%s: job %s deploys without refreshing the preview copy afterwards (go run ./cmd/previewstack copy --stack S)", wf.path, name))
		}
	}
	return problems
}

// TestPreviewsRunOnCopiesWithoutTheToken holds the identity split on the committed workflows.
func TestPreviewsRunOnCopiesWithoutTheToken(t *testing.T) {
	for _, wf := range loadWorkflows(t) {
		for _, p := range append(previewProgramCredentials(wf), deployRefreshesPreviewCopy(wf)...) {
			t.Error(p)
		}
	}
}

// TestPreviewRulesCatch: the identity split's rules on workflows written to break them, among
// them the preview workflow as it was before the split.
func TestPreviewRulesCatch(t *testing.T) {
	const pa = "pulumi/actions@8582a9e8cc630786854029b4e09281acd6794b58"
	checkRules(t, []ruleCase{
		{"the old preview: action with a command, pull-requests write",
			"on: pull_request\njobs:\n  p:\n    permissions:\n      pull-requests: write\n    steps:\n      - uses: " + pa + "\n        with:\n          command: preview\n          comment-on-pr: true\n",
			previewProgramCredentials, 2},
		{"preview of the stack itself",
			"on: pull_request\njobs:\n  p:\n    steps:\n      - run: pulumi preview --stack prod\n", previewProgramCredentials, 1},
		{"copy previewed without prepare",
			"on: pull_request\njobs:\n  p:\n    steps:\n      - run: pulumi preview --stack \"$STACK-preview\"\n", previewProgramCredentials, 1},
		{"token handed to the program",
			"on: pull_request\njobs:\n  p:\n    steps:\n      - run: go run ./cmd/previewstack prepare --stack s\n      - run: pulumi preview --stack s-preview\n        env:\n          GITHUB_TOKEN: ${{ github.token }}\n",
			previewProgramCredentials, 1},
		{"up on a pull request",
			"on: pull_request\njobs:\n  p:\n    steps:\n      - run: pulumi up --yes --stack s-preview\n", previewProgramCredentials, 1},
		{"the split as committed",
			"on: pull_request\njobs:\n  p:\n    permissions:\n      contents: read\n      id-token: write\n    steps:\n      - uses: " + pa + "\n        with:\n          pulumi-version: 3.250.0\n      - run: |\n          go run ./cmd/previewstack prepare --stack \"$STACK\"\n          pulumi preview --diff --stack \"$STACK-preview\"\n  comment:\n    permissions:\n      pull-requests: write\n    steps:\n      - run: gh api x\n        env:\n          GH_TOKEN: ${{ github.token }}\n",
			previewProgramCredentials, 0},
		{"deploy without the copy",
			"on: push\njobs:\n  up:\n    steps:\n      - uses: " + pa + "\n        with:\n          command: up\n", deployRefreshesPreviewCopy, 1},
		{"deploy, then the copy",
			"on: push\njobs:\n  up:\n    steps:\n      - uses: " + pa + "\n        with:\n          command: up\n      - run: go run ./cmd/previewstack copy --stack \"$STACK\"\n", deployRefreshesPreviewCopy, 0},
	})
}

// ruleCase is a workflow written to break (or keep) a rule, and how many problems the rule must
// find in it.
type ruleCase struct {
	name string
	yaml string
	rule func(workflowFile) []string
	want int // problems found
}

// checkRules runs each case's rule on its workflow.
func checkRules(t *testing.T, cases []ruleCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wf, err := parseWorkflow(tc.name+".yml", []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.rule(wf); len(got) != tc.want {
				t.Errorf("%d problems, want %d: %q", len(got), tc.want, got)
			}
		})
	}
}

// Credentials that outlast the deploy (issue 43): a cloud session that ends before the job may
// stop a `pulumi up` half way, with pending operations to clear by hand; a GPU node group alone
// may take 30 to 90 minutes.

// defaultJobTimeout: GitHub's timeout-minutes when a job sets none (minutes;
// https://docs.github.com/en/actions/reference/workflows-and-actions/workflow-syntax#jobsjob_idtimeout-minutes).
const defaultJobTimeout = 360

// awsDefaultSession: aws-actions/configure-aws-credentials' session when role-duration-seconds is
// not set and a role is assumed with GitHub's OIDC token (seconds; the action's README, input
// role-duration-seconds: "default: 6 hours, 1 hour for OIDC/specified aws-session-token", and "the
// duration cannot exceed the maximum that was defined when the IAM Role was created",
// https://github.com/aws-actions/configure-aws-credentials#readme). The role's MaxSessionDuration
// must allow what is asked: 3600 to 43200 seconds, one hour by default (IAM API UpdateRole,
// https://docs.aws.amazon.com/IAM/latest/APIReference/API_UpdateRole.html; STS
// AssumeRoleWithWebIdentity DurationSeconds, "By default, the value is set to 3600 seconds").
const awsDefaultSession = 3600

// awsMaxSession: IAM's upper bound on a role's MaxSessionDuration (seconds).
const awsMaxSession = 43200

// jobTimeout: the job's timeout-minutes (a literal), or GitHub's default; -1 for an expression.
func jobTimeout(j workflowJob) int {
	if j.Timeout.Kind == 0 {
		return defaultJobTimeout
	}
	var n int
	if _, err := fmt.Sscan(j.Timeout.Value, &n); err != nil || fmt.Sprint(n) != j.Timeout.Value {
		return -1
	}
	return n
}

// cloudSessionShorterThanJob: a job that assumes an AWS role must ask for a session at least as
// long as the job may run (role-duration-seconds, a literal within IAM's 12 hours); a session the
// SDKs cannot renew ends the deploy at the hour otherwise.
func cloudSessionShorterThanJob(wf workflowFile) []string {
	var problems []string
	for _, name := range wf.jobNames() {
		j, _ := wf.job(name)
		minutes := jobTimeout(j)
		for _, s := range wf.steps(name) {
			if !strings.HasPrefix(strings.ToLower(s.Uses), "aws-actions/configure-aws-credentials@") {
				continue
			}
			if minutes < 0 {
				problems = append(problems, fmt.Sprintf("%s: job %s: timeout-minutes %q is not a number: the AWS session cannot be checked against it", wf.path, name, j.Timeout.Value))
				continue
			}
			seconds, set := awsDefaultSession, s.With["role-duration-seconds"]
			if set != "" {
				if _, err := fmt.Sscan(set, &seconds); err != nil || fmt.Sprint(seconds) != set {
					problems = append(problems, fmt.Sprintf("%s: job %s: role-duration-seconds %q is not a number of seconds", wf.path, name, set))
					continue
				}
			}
			switch {
			case seconds < minutes*60:
				problems = append(problems, fmt.Sprintf("%s: job %s runs up to %d minutes with an AWS session of %d s: set role-duration-seconds to at least %d (and the role's MaxSessionDuration)", wf.path, name, minutes, seconds, minutes*60))
			case seconds > awsMaxSession:
				problems = append(problems, fmt.Sprintf("%s: job %s: role-duration-seconds %d is over IAM's 12 hours (%d): the role cannot be assumed", wf.path, name, seconds, awsMaxSession))
			}
		}
	}
	return problems
}

// kubeloginInstall: a pinned kubelogin (`go install github.com/Azure/kubelogin@vX.Y.Z`, the
// version in the command or in the step's env).
var kubeloginInstall = regexp.MustCompile(`go install "?github\.com/Azure/kubelogin@([^\s"]+)`)

var semver = regexp.MustCompile(`^v\d+\.\d+\.\d+$`)

// aksWithoutKubelogin: the AKS kubeconfig's user runs kubelogin (components/cloud/aks); a job
// that signs in to Azure (azure/login) and runs the program must install kubelogin at a pinned
// version first, and have it sign in unattended with workload identity (AAD_LOGIN_METHOD
// workloadidentity, AZURE_CLIENT_ID, AZURE_TENANT_ID on the step that runs the program). kubelogin
// takes its login method from AAD_LOGIN_METHOD over the kubeconfig's --login ("It may be specified
// in AAD_LOGIN_METHOD environment variable", `kubelogin get-token --help`), and its workload
// identity mode, where GitHub Actions' ACTIONS_ID_TOKEN_REQUEST_URL and _TOKEN are set, asks GitHub
// for a fresh OIDC token for every assertion (kubelogin v0.2.16 pkg/internal/token/provider.go,
// githubactionscredential.go; "Workload Identity" login mode,
// https://azure.github.io/kubelogin/concepts/login-modes/workloadidentity.html). The Azure CLI's
// sign-in, which --login azurecli reads, cannot renew its OIDC assertion after about ten minutes
// ("Azure CLI task fails: AADSTS700024", https://github.com/Azure/azure-cli/issues/28708).
func aksWithoutKubelogin(wf workflowFile) []string {
	var problems []string
	for _, name := range wf.jobNames() {
		steps := wf.steps(name)
		azure := slices.ContainsFunc(steps, func(s stepInfo) bool { return strings.HasPrefix(strings.ToLower(s.Uses), "azure/login@") })
		if !azure {
			continue
		}
		installed := false
		for _, s := range steps {
			m := kubeloginInstall.FindStringSubmatch(s.Run)
			if m == nil {
				if s.runsProgram() {
					if !installed {
						problems = append(problems, fmt.Sprintf("%s: job %s signs in to Azure and runs the program without installing kubelogin first (the AKS kubeconfig runs it): `go install github.com/Azure/kubelogin@vX.Y.Z`", wf.path, name))
					}
					login := s.Env["AAD_LOGIN_METHOD"]
					if !strings.Contains(login, "workloadidentity") || s.Env["AZURE_CLIENT_ID"] == "" || s.Env["AZURE_TENANT_ID"] == "" {
						problems = append(problems, fmt.Sprintf("%s: job %s: kubelogin signs in with the Azure CLI (AAD_LOGIN_METHOD %q), whose OIDC sign-in expires within minutes: set AAD_LOGIN_METHOD to workloadidentity with AZURE_CLIENT_ID and AZURE_TENANT_ID on the step", wf.path, name, login))
					}
				}
				continue
			}
			version := m[1]
			if version == "$KUBELOGIN_VERSION" || version == "${KUBELOGIN_VERSION}" {
				version = s.Env["KUBELOGIN_VERSION"]
			}
			if !semver.MatchString(version) {
				problems = append(problems, fmt.Sprintf("%s: job %s installs kubelogin at %q: pin a release (vX.Y.Z)", wf.path, name, version))
			}
			installed = true
		}
	}
	return problems
}

// TestWorkflowCredentialsOutlastJobs holds the lifetime rules on the committed workflows.
func TestWorkflowCredentialsOutlastJobs(t *testing.T) {
	for _, wf := range loadWorkflows(t) {
		for _, p := range append(cloudSessionShorterThanJob(wf), aksWithoutKubelogin(wf)...) {
			t.Error(p)
		}
	}
}

// TestCredentialLifetimeRulesCatch: the lifetime rules on workflows written to break them, the
// deploy job as it was before among them.
func TestCredentialLifetimeRulesCatch(t *testing.T) {
	const (
		aws   = "aws-actions/configure-aws-credentials@7474bc4690e29a8392af63c5b98e7449536d5c3a"
		azure = "azure/login@7184910d9eb2b1c5e48f7073824a90609bb9b6d6"
		pa    = "pulumi/actions@8582a9e8cc630786854029b4e09281acd6794b58"
	)
	awsJob := func(timeout, with string) string {
		return "on: push\njobs:\n  up:\n" + timeout + "    steps:\n      - uses: " + aws + "\n        with:\n          role-to-assume: r\n" + with
	}
	const wi = "          AAD_LOGIN_METHOD: workloadidentity\n          AZURE_CLIENT_ID: c\n          AZURE_TENANT_ID: t\n"
	azureJob := func(install, env string) string {
		return "on: push\njobs:\n  up:\n    steps:\n      - uses: " + azure + "\n" + install +
			"      - uses: " + pa + "\n        with:\n          command: up\n" + env
	}
	const install = "      - run: go install github.com/Azure/kubelogin@v0.2.16\n"
	checkRules(t, []ruleCase{
		{"the old deploy: 180 minutes, the default hour", awsJob("    timeout-minutes: 180\n", ""), cloudSessionShorterThanJob, 1},
		{"no timeout: GitHub's six hours", awsJob("", "          role-duration-seconds: 10800\n"), cloudSessionShorterThanJob, 1},
		{"session as long as the job", awsJob("    timeout-minutes: 180\n", "          role-duration-seconds: 10800\n"), cloudSessionShorterThanJob, 0},
		{"session from an expression", awsJob("    timeout-minutes: 180\n", "          role-duration-seconds: ${{ vars.D }}\n"), cloudSessionShorterThanJob, 1},
		{"over IAM's 12 hours", awsJob("    timeout-minutes: 180\n", "          role-duration-seconds: 50000\n"), cloudSessionShorterThanJob, 1},
		{"short job, default hour", awsJob("    timeout-minutes: 30\n", ""), cloudSessionShorterThanJob, 0},
		{"the old deploy: no kubelogin, the CLI's sign-in", azureJob("", ""), aksWithoutKubelogin, 2},
		{"kubelogin, the CLI's sign-in", azureJob(install, "        env:\n          AAD_LOGIN_METHOD: azurecli\n"), aksWithoutKubelogin, 1},
		{"kubelogin unpinned", azureJob("      - run: go install github.com/Azure/kubelogin@latest\n", "        env:\n"+wi), aksWithoutKubelogin, 1},
		{"kubelogin after the program", "on: push\njobs:\n  up:\n    steps:\n      - uses: " + azure + "\n      - uses: " + pa + "\n        with:\n          command: up\n        env:\n" + wi + install, aksWithoutKubelogin, 1},
		{"pinned by env, workload identity", azureJob("      - run: go install \"github.com/Azure/kubelogin@$KUBELOGIN_VERSION\"\n        env:\n          KUBELOGIN_VERSION: v0.2.16\n", "        env:\n"+wi), aksWithoutKubelogin, 0},
		{"not an Azure job", "on: push\njobs:\n  up:\n    steps:\n      - uses: " + pa + "\n        with:\n          command: up\n", aksWithoutKubelogin, 0},
	})
}
