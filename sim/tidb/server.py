"""One HTTP server on 127.0.0.1 playing Prometheus, every cluster's PD and an external recommender.

Routes (all JSON):

- Prometheus HTTP API: `GET|POST /api/v1/query` (query, time) and `/api/v1/query_range`
  (query, start, end, step), answering `{"status": "success", "data": {...}}` or
  `{"status": "error", "errorType": "bad_data", ...}` with 400, like Prometheus. Series, per
  running instance (labels instance=<pod>, kubernetes_namespace, kubernetes_pod_name,
  tidb_cluster=<tc>, component): tikv_thread_cpu_seconds_total and process_cpu_seconds_total
  (counters), tikv_server_cpu_cores_quota / tidb_server_maxprocs (gauges), and
  tikv_store_size_bytes{type="capacity"|"available"|"used"}. There is no history: every step
  of a range query answers the present load.
- PD, one per base cluster, under `/pd/<namespace>/<cluster>`: `GET .../pd/api/v1/stores`,
  `GET .../pd/api/v1/store/<id>`, `POST .../autoscaling` (released behaviour, see pd.py).
- Scrape side, for a real Prometheus (exposition.py): `GET /sim/v1/targets` is an HTTP service
  discovery document (one target per running instance, kubernetes_sd's labels) and
  `GET /metrics/<namespace>/<pod>` that pod's exposition text, as real TiKV/TiDB serve it.
- External recommender: `GET /external?name=&namespace=&type=` answers
  {name, namespace, type, recommendedReplicas} (404 when no recommendation is scripted).
- Control: `GET|POST|PUT|DELETE /sim/v1/load` (POST merges, PUT replaces, see load.py),
  `GET|POST|DELETE /sim/v1/faults` ({"prometheus": {"mode": "error", "times": 2}, ...}),
  `GET /sim/v1/instances` (what the fakes measure now), `GET /sim/v1/stats` (requests by route).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

from sim.http import Drop, HttpError, JsonHandler, Server, parse_json
from sim.kube.store import Store
from sim.tidb import exposition, promql
from sim.tidb.load import Fault, Instance, LoadModel
from sim.tidb.operator import base_of, config_labels, tidb_clusters
from sim.tidb.pd import BadStrategy, autoscaling_plans, reported_quota, store_json

MAX_RANGE_POINTS = 11000  # Prometheus refuses more points per series
SCRAPE_VIEW_S = 0.2  # scrapes this close together read one view of the instances


def _prom_error(message: str, kind: str = "bad_data", code: int = 400) -> HttpError:
    return HttpError(code, {"status": "error", "errorType": kind, "error": message})


def _timestamp(text: str | None, default: float) -> float:
    if not text:
        return default
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise _prom_error(f'invalid parameter "time": cannot parse "{text}" to a valid timestamp') from None


def series_of(instances: list[Instance]) -> list[promql.Series]:
    out: list[promql.Series] = []
    for inst in instances:
        base = {
            "instance": inst.pod,
            "kubernetes_namespace": inst.namespace,
            "kubernetes_pod_name": inst.pod,
            "tidb_cluster": inst.cluster,
            "component": inst.component,
        }

        def add(name: str, value: float, rate: float | None = None, base: dict[str, str] = base, **extra: str) -> None:
            out.append(promql.Series({"__name__": name, **base, **extra}, value, rate))

        add("process_cpu_seconds_total", inst.cpu_seconds, inst.cpu)
        if inst.component == "tikv":
            add("tikv_thread_cpu_seconds_total", inst.cpu_seconds, inst.cpu)
            add("tikv_server_cpu_cores_quota", reported_quota(inst))
            add("tikv_store_size_bytes", float(inst.capacity), type="capacity")
            add("tikv_store_size_bytes", float(inst.capacity - inst.used), type="available")
            add("tikv_store_size_bytes", float(inst.used), type="used")
        else:
            add("tidb_server_maxprocs", reported_quota(inst))
    return out


class TidbServer:
    def __init__(self, store: Store, load: LoadModel | None = None, host: str = "127.0.0.1", port: int = 0) -> None:
        self.store = store
        self.load = load or LoadModel()
        self.httpd = Server((host, port), _Handler)
        self.httpd.tidb = self  # type: ignore[attr-defined]
        self.thread: threading.Thread | None = None
        self.stats: Counter[str] = Counter()
        self.stats_lock = threading.Lock()
        self._store_ids: dict[str, int] = {}
        self._store_started: dict[str, int] = {}
        self._ids_lock = threading.Lock()
        self._scraped: tuple[float, dict[str, Instance]] = (0.0, {})
        self._scrape_lock = threading.Lock()

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def prometheus_url(self) -> str:
        return self.url

    def pd_url(self, namespace: str, cluster: str) -> str:
        return f"{self.url}/pd/{namespace}/{cluster}"

    @property
    def external_url(self) -> str:
        return f"{self.url}/external"

    def start(self) -> TidbServer:
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1}, name="sim-tidb-server", daemon=True
        )
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self.thread:
            self.thread.join(timeout=5)

    def count(self, route: str) -> None:
        with self.stats_lock:
            self.stats[route] += 1

    def scrape_view(self) -> dict[str, Instance]:
        """Instances by their metrics path, shared by the scrapes of one instant: a Prometheus
        scraping every pod each second would otherwise walk every pod once per pod."""
        with self._scrape_lock:
            at, view = self._scraped
            if time.monotonic() - at > SCRAPE_VIEW_S:
                view = {exposition.metrics_path(i): i for i in self.load.instances(self.store)}
                self._scraped = (time.monotonic(), view)
            return view

    def store_id(self, inst: Instance) -> tuple[int, int]:
        """PD's id for a TiKV instance (stable while its pod lives) and when it registered."""
        with self._ids_lock:
            if inst.uid not in self._store_ids:
                self._store_ids[inst.uid] = len(self._store_ids) + 1
                self._store_started[inst.uid] = int(time.time())
            return self._store_ids[inst.uid], self._store_started[inst.uid]

    def family(self, namespace: str, cluster: str) -> tuple[list[Instance], dict[str, dict[str, Any]]]:
        """The running instances and TidbClusters that join the PD of namespace/cluster."""
        clusters = {
            tc["metadata"]["name"]: tc for tc in tidb_clusters(self.store) if base_of(tc) == (namespace, cluster)
        }
        if cluster not in clusters:
            raise HttpError(404, {"error": f"no TidbCluster {namespace}/{cluster}: no PD there"})
        instances = [i for i in self.load.instances(self.store) if (i.base_namespace, i.base) == (namespace, cluster)]
        return instances, clusters


class _Handler(JsonHandler):
    methods = ("GET", "POST", "PUT", "DELETE")
    server: Server

    @property
    def tidb(self) -> TidbServer:
        return self.server.tidb  # type: ignore[attr-defined,no-any-return]

    def dispatch(self, method: str) -> None:
        parts = urlsplit(self.path)
        path = parts.path.rstrip("/") or "/"
        raw = self.read_body()
        params = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        if path in ("/api/v1/query", "/api/v1/query_range"):
            if method == "POST" and "form-urlencoded" in (self.headers.get("Content-Type") or ""):
                params.update({k: v[-1] for k, v in parse_qs(raw.decode(), keep_blank_values=True).items()})
            self.tidb.count(path)
            self._prometheus(path, params)
        elif path.startswith("/pd/"):
            self._pd(method, path, raw)
        elif path.startswith(exposition.METRICS_PATH + "/") and method == "GET":
            self.tidb.count(exposition.METRICS_PATH)
            self._scrape(path)
        elif path == "/sim/v1/targets" and method == "GET":
            self.send_json(
                200,
                exposition.targets(self.tidb.load.instances(self.tidb.store), self.tidb.url.removeprefix("http://")),
            )
        elif path == "/external" and method == "GET":
            self.tidb.count("/external")
            self._external(params)
        elif path.startswith("/sim/v1/"):
            self._control(method, path, raw)
        else:
            raise self.error(404, f"no route {method} {path}")

    def _fault(self, target: str) -> Fault | None:
        fault = self.tidb.load.take_fault(target)
        if fault is not None and fault.mode == "delay":
            time.sleep(fault.seconds)
            return None
        if fault is not None and fault.mode == "drop":
            raise Drop()
        return fault

    # ---- Prometheus ----------------------------------------------------------------------
    def _prometheus(self, path: str, params: dict[str, str]) -> None:
        query = params.get("query", "")
        fault = self._fault("prometheus")
        if fault is not None and fault.mode == "error":
            raise _prom_error(
                "injected failure: query processing would load too many samples", "internal", fault.status
            )
        series = [] if fault is not None else series_of(self.tidb.load.instances(self.tidb.store))
        now = time.time()
        try:
            if path == "/api/v1/query":
                at = _timestamp(params.get("time"), now)
                result = promql.evaluate(query, series)
                if isinstance(result, float):
                    data: dict[str, Any] = {"resultType": "scalar", "result": [at, promql.format_value(result)]}
                else:
                    data = {
                        "resultType": "vector",
                        "result": [{"metric": s.labels, "value": [at, promql.format_value(s.value)]} for s in result],
                    }
            else:
                data = self._range(query, params, series)
        except promql.PromQLError as exc:
            raise _prom_error(str(exc)) from None
        self.send_json(200, {"status": "success", "data": data})

    def _scrape(self, path: str) -> None:
        """One pod's /metrics; 404 once it stops running (Prometheus marks its series stale)."""
        inst = self.tidb.scrape_view().get(path)
        if inst is None:
            raise self.error(404, f"no running tikv/tidb instance at {path}")
        self.send_bytes(200, exposition.exposition(inst).encode(), "text/plain; version=0.0.4; charset=utf-8")

    def _range(self, query: str, params: dict[str, str], series: list[promql.Series]) -> dict[str, Any]:
        for key in ("start", "end", "step"):
            if not params.get(key):
                raise _prom_error(f'invalid parameter "{key}": missing')
        start, end = _timestamp(params["start"], 0), _timestamp(params["end"], 0)
        try:
            step = float(params["step"])
        except ValueError:
            step = promql.parse_duration(params["step"])
        if end < start:
            raise _prom_error('invalid parameter "end": end timestamp must not be before start time')
        if step <= 0:
            raise _prom_error("zero or negative query resolution step widths are not accepted")
        if (end - start) / step > MAX_RANGE_POINTS:
            raise _prom_error("exceeded maximum resolution of 11,000 points per timeseries")
        result = promql.evaluate(query, series)
        if isinstance(result, float):
            raise promql.PromQLError("range queries need an instant vector expression")
        stamps = []
        t = start
        while t <= end + 1e-9:
            stamps.append(t)
            t += step
        return {
            "resultType": "matrix",
            "result": [
                {"metric": s.labels, "values": [[ts, promql.format_value(s.value)] for ts in stamps]} for s in result
            ],
        }

    # ---- PD ------------------------------------------------------------------------------
    def _pd(self, method: str, path: str, raw: bytes) -> None:
        seg = path.strip("/").split("/")  # pd, ns, cluster, rest...
        if len(seg) < 4:
            raise self.error(404, "PD routes are /pd/<namespace>/<cluster>/...")
        ns, cluster, rest = seg[1], seg[2], "/" + "/".join(seg[3:])
        route = "/pd/*/*" + (rest if not rest.startswith("/pd/api/v1/store/") else "/pd/api/v1/store/*")
        self.tidb.count(route)
        fault = self._fault("pd")
        if fault is not None and fault.mode == "error":
            raise HttpError(fault.status, "[PD:server:ErrServerNotStarted]server not started (injected)")
        instances, clusters = self.tidb.family(ns, cluster)
        if rest == "/autoscaling" and method == "POST":
            if fault is not None:  # "empty": released PD writes null when it cannot read metrics
                self.send_json(200, None)
                return
            try:
                body = parse_json(raw)
                plans = autoscaling_plans(body, instances, clusters)
            except (ValueError, BadStrategy) as exc:
                raise HttpError(400, str(exc)) from None
            self.send_json(200, plans)
            return
        if method != "GET":
            raise self.error(405, f"{method} not allowed on {rest}")
        stores = []
        for inst in instances if fault is None else []:
            if inst.component != "tikv":
                continue
            store_id, started = self.tidb.store_id(inst)
            stores.append(store_json(inst, store_id, config_labels(clusters[inst.cluster], "tikv"), started))
        if rest == "/pd/api/v1/stores":
            self.send_json(200, {"count": len(stores), "stores": stores})
        elif rest.startswith("/pd/api/v1/store/"):
            wanted = rest.rsplit("/", 1)[1]
            found = next((s for s in stores if str(s["store"]["id"]) == wanted), None)
            if found is None:
                raise HttpError(404, f"[PD:core:ErrStoreNotFound]store id {wanted} not found")
            self.send_json(200, found)
        else:
            raise self.error(404, f"no PD route {rest}")

    # ---- external recommender ------------------------------------------------------------
    def _external(self, params: dict[str, str]) -> None:
        fault = self._fault("external")
        if fault is not None and fault.mode == "error":
            raise self.error(fault.status, "injected failure")
        name, ns, kind = params.get("name", ""), params.get("namespace", ""), params.get("type", "")
        if not (name and ns and kind):
            raise self.error(400, "name, namespace and type are required")
        with self.tidb.load.lock:
            replicas = self.tidb.load.external.get((ns, name, kind))
        if replicas is None or fault is not None:
            raise self.error(404, f"no recommendation for {ns}/{name} {kind}")
        self.send_json(200, {"name": name, "namespace": ns, "type": kind, "recommendedReplicas": replicas})

    # ---- control -------------------------------------------------------------------------
    def _control(self, method: str, path: str, raw: bytes) -> None:
        load = self.tidb.load
        try:
            body = parse_json(raw, {})
            if path == "/sim/v1/load" and method == "GET":
                pass
            elif path == "/sim/v1/load" and method in ("POST", "PUT"):
                load.apply(body, replace=method == "PUT")
            elif path == "/sim/v1/load" and method == "DELETE":
                load.apply({}, replace=True)
            elif path == "/sim/v1/faults" and method == "POST":
                for target, spec in body.items():
                    load.set_fault(target, None if spec is None else Fault(**spec))
            elif path == "/sim/v1/faults" and method == "DELETE":
                for target in list(load.faults):
                    load.set_fault(target, None)
            elif path == "/sim/v1/faults" and method == "GET":
                pass
            elif path == "/sim/v1/instances" and method == "GET":
                self.send_json(200, {"instances": [vars(i) for i in load.instances(self.tidb.store)]})
                return
            elif path == "/sim/v1/stats" and method == "GET":
                with self.tidb.stats_lock:
                    self.send_json(200, dict(self.tidb.stats))
                return
            else:
                raise self.error(404, f"no control endpoint {method} {path}")
        except (TypeError, ValueError) as exc:
            raise self.error(400, str(exc)) from None
        self.send_json(200, load.describe())
