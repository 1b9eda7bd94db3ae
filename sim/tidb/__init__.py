"""A simulated TiDB world for the components loop (seed 002: TiKV and TiDB scaled
on CPU and storage use), beside the emulated API server.

- `operator.TidbOperator`: a tidb-operator stand-in that turns pingcap.com/v1alpha1
  TidbClusters into `<tc>-pd-<n>`, `<tc>-tikv-<n>` and `<tc>-tidb-<n>` pods and reports
  replicas in the TidbCluster's status.
- `load.LoadModel`: scripted CPU demand and storage use per cluster, component or pod.
- `server.TidbServer`: one HTTP server on 127.0.0.1 answering as Prometheus (`/api/v1/query`,
  `/api/v1/query_range`), as each cluster's PD (`/pd/<namespace>/<cluster>/...`: the stores
  API and `POST /autoscaling` with the released behaviour), and as an external recommender
  (`/external`), with control endpoints under `/sim/v1/`.
- `world.FakeTidb`: all of it attached to a running `sim.cluster.FakeCluster`.

Like the rest of sim/, nothing here imports growth's packages: it stands for the outside world.
"""
