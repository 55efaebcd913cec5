package monitoring

import (
	"encoding/json"
	"fmt"

	appsv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apps/v1"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/meta"
)

const (
	// DataSourceUID is the provisioned Prometheus data source; the dashboard refers to it.
	DataSourceUID = "kolotoc-prometheus"
	// DashboardUID is the GPU dashboard's uid: its URL is /d/<uid>.
	DashboardUID = "kolotoc-gpus"
	// GrafanaAdminUser is Grafana's admin login; the password is kolotoc:grafanaPassword.
	GrafanaAdminUser = "admin"
	// dashboardsDir is where the dashboard JSON is mounted and the provider reads it.
	dashboardsDir = "/var/lib/grafana-dashboards/kolotoc"
	// GrafanaSecretName is the Secret of the admin password.
	GrafanaSecretName = GrafanaName
	// grafanaSecretKey is the Secret key of the admin password.
	grafanaSecretKey = "admin-password"
)

// RenderGrafanaSecret holds the admin password; a secret in state because the password is.
func RenderGrafanaSecret(a *Args) *corev1.SecretArgs {
	return &corev1.SecretArgs{
		Metadata: a.Labels.ObjectMeta(GrafanaSecretName, a.Namespace, GrafanaName),
		Type:     pulumi.String("Opaque"),
		StringData: pulumi.StringMap{
			grafanaSecretKey: pulumi.ToSecret(a.GrafanaPassword.ToStringOutput()).(pulumi.StringOutput),
		},
	}
}

// DataSources is Grafana's data source provisioning: the stack's Prometheus, as the default.
func DataSources(a *Args) string {
	return fmt.Sprintf(`apiVersion: 1
datasources:
  - name: Prometheus
    uid: %s
    type: prometheus
    access: proxy
    url: http://%s.%s.svc:%d
    isDefault: true
    editable: false
`, DataSourceUID, PrometheusName, a.NamespaceDNS, PrometheusPort)
}

// DashboardProviders is Grafana's dashboard provisioning: the mounted JSON files, read-only.
func DashboardProviders() string {
	return fmt.Sprintf(`apiVersion: 1
providers:
  - name: kolotoc
    folder: Kolotoc
    type: file
    disableDeletion: true
    allowUiUpdates: false
    options:
      path: %s
`, dashboardsDir)
}

// RenderGrafanaProvisioning holds the data source and dashboard provider files.
func RenderGrafanaProvisioning(a *Args) *corev1.ConfigMapArgs {
	return &corev1.ConfigMapArgs{
		Metadata: a.Labels.ObjectMeta(GrafanaName+"-provisioning", a.Namespace, GrafanaName),
		Data: pulumi.StringMap{
			"datasources.yaml": pulumi.String(DataSources(a)),
			"dashboards.yaml":  pulumi.String(DashboardProviders()),
		},
	}
}

// RenderGrafanaDashboards holds the GPU dashboard.
func RenderGrafanaDashboards(a *Args) (*corev1.ConfigMapArgs, error) {
	dash, err := GPUDashboardJSON()
	if err != nil {
		return nil, err
	}
	return &corev1.ConfigMapArgs{
		Metadata: a.Labels.ObjectMeta(GrafanaName+"-dashboards", a.Namespace, GrafanaName),
		Data:     pulumi.StringMap{"gpus.json": pulumi.String(dash)},
	}, nil
}

// RenderGrafana builds Grafana. Its database is an emptyDir: everything in it (data source,
// dashboard, admin user) is provisioned at start, so nothing of value is lost with the pod. The
// admin password is read from the Secret when Grafana creates its database, that is at pod
// start: after changing kolotoc:grafanaPassword, restart the pod (`kubectl rollout restart`).
func RenderGrafana(a *Args) (*appsv1.DeploymentArgs, error) {
	dash, err := GPUDashboardJSON()
	if err != nil {
		return nil, err
	}
	item := func(key, path string) corev1.KeyToPathArray {
		return corev1.KeyToPathArray{corev1.KeyToPathArgs{Key: pulumi.String(key), Path: pulumi.String(path)}}
	}
	provisioning := func(volume, key string) corev1.VolumeArgs {
		return corev1.VolumeArgs{Name: pulumi.String(volume), ConfigMap: &corev1.ConfigMapVolumeSourceArgs{
			Name: pulumi.String(GrafanaName + "-provisioning"), Items: item(key, "kolotoc.yaml"),
		}}
	}
	env := func(name, value string) corev1.EnvVarArgs {
		return corev1.EnvVarArgs{Name: pulumi.String(name), Value: pulumi.String(value)}
	}
	return &appsv1.DeploymentArgs{
		Metadata: a.Labels.ObjectMeta(GrafanaName, a.Namespace, GrafanaName),
		Spec: &appsv1.DeploymentSpecArgs{
			Replicas: pulumi.Int(1),
			Strategy: &appsv1.DeploymentStrategyArgs{Type: pulumi.String("Recreate")},
			Selector: &metav1.LabelSelectorArgs{MatchLabels: pulumi.ToStringMap(a.Labels.Selector(GrafanaName))},
			Template: &corev1.PodTemplateSpecArgs{
				Metadata: &metav1.ObjectMetaArgs{
					Labels: pulumi.ToStringMap(a.Labels.PodLabels(GrafanaName)),
					Annotations: pulumi.StringMap{
						configHashAnnotation: pulumi.String(hash(DataSources(a), DashboardProviders(), dash)),
					},
				},
				Spec: &corev1.PodSpecArgs{
					NodeSelector:                 a.Labels.PoolSelector(a.Pool),
					ImagePullSecrets:             a.Labels.ImagePullSecrets(),
					AutomountServiceAccountToken: pulumi.Bool(false),
					SecurityContext:              meta.PodSecurity(472),
					Containers: corev1.ContainerArray{corev1.ContainerArgs{
						Name:  pulumi.String(GrafanaName),
						Image: pulumi.String(a.GrafanaImage),
						Env: corev1.EnvVarArray{
							env("GF_SECURITY_ADMIN_USER", GrafanaAdminUser),
							// The value never appears in the pod spec, only the Secret's name.
							corev1.EnvVarArgs{Name: pulumi.String("GF_SECURITY_ADMIN_PASSWORD"), ValueFrom: &corev1.EnvVarSourceArgs{
								SecretKeyRef: &corev1.SecretKeySelectorArgs{Name: pulumi.String(GrafanaSecretName), Key: pulumi.String(grafanaSecretKey)},
							}},
							env("GF_AUTH_ANONYMOUS_ENABLED", "false"),
							env("GF_USERS_ALLOW_SIGN_UP", "false"),
							env("GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH", dashboardsDir+"/gpus.json"),
							// Training clusters often have no way out; do not try.
							env("GF_ANALYTICS_REPORTING_ENABLED", "false"),
							env("GF_ANALYTICS_CHECK_FOR_UPDATES", "false"),
							env("GF_ANALYTICS_CHECK_FOR_PLUGIN_UPDATES", "false"),
						},
						Ports: corev1.ContainerPortArray{corev1.ContainerPortArgs{Name: pulumi.String("http"), ContainerPort: pulumi.Int(GrafanaPort)}},
						ReadinessProbe: &corev1.ProbeArgs{
							HttpGet:       &corev1.HTTPGetActionArgs{Path: pulumi.String("/api/health"), Port: pulumi.Int(GrafanaPort)},
							PeriodSeconds: pulumi.Int(10),
						},
						Resources: &corev1.ResourceRequirementsArgs{
							Requests: pulumi.StringMap{"cpu": pulumi.String("250m"), "memory": pulumi.String("512Mi")},
							Limits:   pulumi.StringMap{"cpu": pulumi.String("1"), "memory": pulumi.String("1Gi")},
						},
						SecurityContext: meta.LockedDown(),
						VolumeMounts: corev1.VolumeMountArray{
							corev1.VolumeMountArgs{Name: pulumi.String("data"), MountPath: pulumi.String("/var/lib/grafana")},
							corev1.VolumeMountArgs{Name: pulumi.String("datasources"), MountPath: pulumi.String("/etc/grafana/provisioning/datasources"), ReadOnly: pulumi.Bool(true)},
							corev1.VolumeMountArgs{Name: pulumi.String("dashboard-providers"), MountPath: pulumi.String("/etc/grafana/provisioning/dashboards"), ReadOnly: pulumi.Bool(true)},
							corev1.VolumeMountArgs{Name: pulumi.String("dashboards"), MountPath: pulumi.String(dashboardsDir), ReadOnly: pulumi.Bool(true)},
						},
					}},
					Volumes: corev1.VolumeArray{
						corev1.VolumeArgs{Name: pulumi.String("data"), EmptyDir: &corev1.EmptyDirVolumeSourceArgs{SizeLimit: pulumi.String("1Gi")}},
						provisioning("datasources", "datasources.yaml"),
						provisioning("dashboard-providers", "dashboards.yaml"),
						corev1.VolumeArgs{Name: pulumi.String("dashboards"), ConfigMap: &corev1.ConfigMapVolumeSourceArgs{
							Name: pulumi.String(GrafanaName + "-dashboards"),
						}},
					},
				},
			},
		},
	}, nil
}

// RenderGrafanaService exposes Grafana.
func RenderGrafanaService(a *Args) *corev1.ServiceArgs {
	return service(a, GrafanaName, "http", GrafanaPort)
}

// GPUMetric is one quantity of the GPU dashboard: a DCGM exporter metric and how its per-GPU
// series are combined per node.
type GPUMetric struct {
	Title  string // panel title stem
	Metric string // DCGM exporter metric name
	Unit   string // Grafana unit id
	ByNode string // PromQL aggregation per node: sum, max or avg
}

// GPUMetrics are the dashboard's quantities, each shown per GPU and per node. The names are the
// DCGM exporter 3.x defaults (default-counters.csv).
var GPUMetrics = []GPUMetric{
	{Title: "Power", Metric: "DCGM_FI_DEV_POWER_USAGE", Unit: "watt", ByNode: "sum"},
	{Title: "Temperature", Metric: "DCGM_FI_DEV_GPU_TEMP", Unit: "celsius", ByNode: "max"},
	{Title: "Utilisation", Metric: "DCGM_FI_DEV_GPU_UTIL", Unit: "percent", ByNode: "avg"},
	{Title: "Memory used", Metric: "DCGM_FI_DEV_FB_USED", Unit: "decmbytes", ByNode: "sum"},
}

type dashboard struct {
	UID           string            `json:"uid"`
	Title         string            `json:"title"`
	Tags          []string          `json:"tags"`
	Editable      bool              `json:"editable"`
	SchemaVersion int               `json:"schemaVersion"`
	Refresh       string            `json:"refresh"`
	Time          map[string]string `json:"time"`
	Panels        []panel           `json:"panels"`
}

type panel struct {
	ID          int            `json:"id"`
	Type        string         `json:"type"`
	Title       string         `json:"title"`
	GridPos     map[string]int `json:"gridPos"`
	Datasource  datasourceRef  `json:"datasource"`
	Targets     []target       `json:"targets"`
	FieldConfig fieldConfig    `json:"fieldConfig"`
}

type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type target struct {
	RefID        string        `json:"refId"`
	Datasource   datasourceRef `json:"datasource"`
	Expr         string        `json:"expr"`
	LegendFormat string        `json:"legendFormat"`
}

type fieldConfig struct {
	Defaults struct {
		Unit string `json:"unit"`
	} `json:"defaults"`
	Overrides []any `json:"overrides"`
}

// GPUDashboardJSON renders the GPU dashboard: for each quantity, a panel per GPU (left) and per
// node (right).
func GPUDashboardJSON() (string, error) {
	ds := datasourceRef{Type: "prometheus", UID: DataSourceUID}
	d := dashboard{
		UID: DashboardUID, Title: "Kolotoc GPUs", Tags: []string{"kolotoc", "gpu", "dcgm"},
		SchemaVersion: 39, Refresh: "30s", Time: map[string]string{"from": "now-6h", "to": "now"},
	}
	for i, m := range GPUMetrics {
		add := func(title, expr, legend string, x int) {
			p := panel{
				ID: len(d.Panels) + 1, Type: "timeseries", Title: title,
				GridPos:    map[string]int{"h": 8, "w": 12, "x": x, "y": i * 8},
				Datasource: ds,
				Targets:    []target{{RefID: "A", Datasource: ds, Expr: expr, LegendFormat: legend}},
			}
			p.FieldConfig.Defaults.Unit = m.Unit
			p.FieldConfig.Overrides = []any{}
			d.Panels = append(d.Panels, p)
		}
		add(m.Title+" per GPU", m.Metric, "{{node}} GPU {{gpu}}", 0)
		add(fmt.Sprintf("%s per node (%s)", m.Title, m.ByNode), fmt.Sprintf("%s by (node) (%s)", m.ByNode, m.Metric), "{{node}}", 12)
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return "", fmt.Errorf("GPU dashboard: %w", err)
	}
	return string(b) + "\n", nil
}
