"""The Kubernetes adapter: observe the GPU side of a cluster with list calls, and apply plan Changes.

The one module of the reconcile path that imports `kubernetes` (kubeobserve.py, its helper, only
parses the raw JSON). Contract:
- observe() makes LIST calls only, paginated with limit/continue (the client's `_continue`): nodes,
  pods in all namespaces, and the ClusterPolicy / DaemonSet / ConfigMaps by `metadata.name` field
  selector. No GET per node. Requests go out raw through the one ApiClient (rawapi.py: the generated API
  classes cost a second of imports per process); each page is read by read_list_page (checked: a garbled
  answer is MP554, never a crash; node and pod pages typed and pruned to the fields migplan reads, shapes.py),
  and the next page is asked for while this one is decoded
  (continue_hint). A device-plugin pod's log is read only when that pod is not Ready (at most
  `max_log_reads` per cycle), a mig-manager pod's log only when its node's state is `failed`.
- apply() turns one Change into one write with field manager "migplan": ConfigMap create or JSON
  merge patch, ClusterPolicy JSON merge patch, DaemonSet strategic merge patch (what `kubectl
  rollout restart` sends), Node JSON merge patch of the label/annotation/unschedulable keys the
  Change names. `dry_run=True` sends the same request with dryRun=All.
- ApiException and urllib3 errors are translated here (api_error, the one translator every adapter
  uses) into reconciler.model.errors: 409 Conflict, 410, 429 and 5xx, connection resets and timeouts
  are Transient (retried with backoff when the request is safe to repeat, 409 never); everything else
  is a MigplanError with the API's message. Each outcome has its own type and registered MP55x code.
- 429 and 5xx with a `Retry-After` header (what the API server's max-in-flight and Priority and
  Fairness filters send when they reject a request: staging/src/k8s.io/apiserver/pkg/server/filters/
  maxinflight.go and priority-and-fairness.go, `tooManyRequests`) are `Throttled`: retried after
  exactly that many seconds, up to 10 retries, as client-go's rest client does (rest/with_retry.go
  `IsNextRetry`/`checkWait`, integer seconds only; the official Python client's
  `kubernetes.utils.retry.retry_after_seconds` parses it the same way). The
  `X-Kubernetes-PF-PriorityLevel-UID` / `-FlowSchema-UID` headers only identify the priority
  level that rejected the request (client-go does not act on them either): they are quoted in the
  error when the retries run out, for the cluster admin to look up.
- apply() is called from several threads at once (the engine's write pool): the one ApiClient is
  shared, its urllib3 pool keeps up to MAX_CONNECTIONS connections (the highest writeConcurrency
  allowed), so at any setting each writer thread reuses a kept-alive connection instead of a new TCP
  and TLS handshake per request (urllib3 discards a connection handed back to a full pool). The pool
  only ever opens as many connections as requests are in flight at once: a larger maxsize costs nothing.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import orjson
import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.utils._retry_base import retry_after_seconds
from tenacity import RetryCallState, retry, retry_if_exception, wait_exponential

from reconciler.adapters import deadline
from reconciler.adapters.kube import deviceclasses as kubedeviceclasses
from reconciler.adapters.kube import informer, rawapi
from reconciler.adapters.kube import observe as kubeobserve
from reconciler.adapters.kube import shapes as kubeshapes
from reconciler.model.dra import DraDriverConfig, DraPluginPod, ObservedDeviceClass
from reconciler.model.errors import EvictionRefused, MigplanError, Transient
from reconciler.model.inventory import MAX_WRITE_CONCURRENCY, GpuOperatorSettings
from reconciler.model.observed import (
    FIELD_MANAGER,
    LAYOUT_REFUSALS,
    ConfigMapState,
    ObservedNode,
    ObservedState,
)
from reconciler.model.plans import Action, Change, Kind

if TYPE_CHECKING:
    from reconciler.engine import ClusterPort

T = TypeVar("T")
S = TypeVar("S")
R = TypeVar("R")

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
CP_GROUP, CP_VERSION, CP_PLURAL = "nvidia.com", "v1", "clusterpolicies"
DEFAULT_PAGE_SIZE = 500
LOG_TAIL_LINES = 200
MAX_LOG_READS = 100  # device-plugin pod logs read per cycle at most
REQUEST_TIMEOUT = (5.0, 30.0)  # connect, read (seconds): the default of every request we send
RETRY_AFTER_MAX_RETRIES = 10  # client-go rest.Request's default maxRetries for Retry-After responses
RETRY_AFTER_CAP = 60.0  # seconds: a Retry-After above this is waited as this (and never past the deadline)
MAX_CONNECTIONS = MAX_WRITE_CONCURRENCY  # urllib3 pool size: every writer thread keeps its connection
PF_PRIORITY_LEVEL_HEADER = "X-Kubernetes-PF-PriorityLevel-UID"


class ApiRequestFailed(MigplanError):
    """The API server refused a request for a reason retrying will not fix (4xx other than 404/409/410/429)."""

    code = "MP550"


class NotFound(ApiRequestFailed):
    code = "MP551"


class ListExpired(Transient):
    """A paginated LIST's continue token expired (410 Gone): the list restarts."""

    code = "MP552"


class ApiConflict(Transient):
    """409: the object changed since it was read. Repeating the same write cannot succeed; the next cycle
    re-observes, so with_retries does not retry it."""

    code = "MP553"


class ApiUnavailable(Transient):
    """429 or 5xx: the API server is busy or failing; worth another try."""

    code = "MP554"


class ApiUnreachable(Transient):
    """No HTTP answer: connection refused or reset, timeout, TLS (the client's own ApiException with status 0)."""

    code = "MP555"


class KubeconfigUnusable(MigplanError):
    """The kubeconfig or the in-cluster configuration cannot be used (missing, unreadable, malformed)."""

    code = "MP556"


class TimeoutApiClient(client.ApiClient):
    """An ApiClient whose every request has a timeout, cut to what is left of the cycle's deadline.

    The official client waits forever when no `_request_timeout` is given, and urllib3 retries a
    timed-out GET three more times on its own: against a server that accepts connections and never
    answers, one LIST would take four read timeouts before our own retries even start. So urllib3's
    retries are switched off (`with_retries` is the one retry loop, and it stops at the deadline),
    every request gets REQUEST_TIMEOUT unless it asks for less, and none outlives the deadline
    (adapters/deadline.py).

    The proxy is pinned to what the environment says when the client is built. The kubeconfig and
    in-cluster loaders refresh the bearer token before every request by setting the configuration's
    `host` again, and the configuration then re-reads every proxy variable of the environment
    (urllib's getproxies: a walk over all of os.environ, per request); but the connection pool,
    proxy included, is built once, here, from `configuration.proxy`, so the re-read value is never
    used. Pinning it (the `proxy` setter) keeps the same proxy and drops that walk.
    """

    def __init__(self, configuration: client.Configuration | None = None, **kwargs: Any) -> None:
        configuration = configuration if configuration is not None else client.Configuration.get_default_copy()
        if configuration.retries is None:
            configuration.retries = False
        configuration.proxy = configuration.proxy  # pinned: see the class docstring
        configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0, MAX_CONNECTIONS)
        super().__init__(configuration, **kwargs)
        self.request_timeout: tuple[float, float] = REQUEST_TIMEOUT

    def call_api(
        self,
        method: str,
        url: str,
        header_params: Any = None,
        body: Any = None,
        post_params: Any = None,
        _request_timeout: Any = None,
    ) -> Any:
        connect, read = _timeouts(_request_timeout, self.request_timeout)
        what = f"{method} {url.split('?', 1)[0]}"
        timeout = (deadline.clamp(connect, what), deadline.clamp(read, what))
        return super().call_api(method, url, header_params, body, post_params, _request_timeout=timeout)


def _timeouts(asked: Any, default: tuple[float, float]) -> tuple[float, float]:
    """(connect, read) from what a caller passed as `_request_timeout` (None, a number or a pair)."""
    if isinstance(asked, int | float) and asked > 0:
        return float(asked), float(asked)
    if isinstance(asked, tuple) and len(asked) == 2:
        return float(asked[0] or default[0]), float(asked[1] or default[1])
    return default


def load_kube_config(path: str | None, *, context: str | None = None) -> client.Configuration:
    """A client Configuration from a kubeconfig file (None: $KUBECONFIG or ~/.kube/config).

    Every way a kubeconfig can be broken — missing, unreadable, not YAML, binary, a list where a
    mapping belongs, a context that is not there, a certificate that does not parse — is one
    MigplanError MP556 naming the file; the official loader raises whatever its parser hit.
    """
    cfg = client.Configuration()
    where = path or "(default kubeconfig)"
    try:
        config.load_kube_config(config_file=path, context=context, client_configuration=cfg)  # type: ignore[no-untyped-call]
    except config.ConfigException as exc:
        raise KubeconfigUnusable(f"kubeconfig {where}: {_first_line(exc)}") from exc
    except OSError as exc:
        raise KubeconfigUnusable(f"kubeconfig {where}: cannot read: {exc.strerror or exc}") from exc
    except Exception as exc:  # yaml, unicode, type and key errors from the loader's parsing
        raise KubeconfigUnusable(
            f"kubeconfig {where}: not a valid kubeconfig ({type(exc).__name__}: {_first_line(exc)})"
        ) from exc
    return cfg


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def api_error(exc: ApiException, what: str, *, conflict: type[Transient] = ApiConflict) -> MigplanError:
    """The one translation of the official client's ApiException into a migplan error, with the request that
    failed and the API's own message. Every adapter that talks to the API server uses it; a caller whose 409 means
    something more precise (the leader Lease) passes its own `conflict` type."""
    status = int(exc.status or 0)
    detail = _api_message(exc)
    if status == 0:  # kubernetes/client/rest.py raises ApiException(status=0) for a TLS failure
        return ApiUnreachable(f"{what}: {detail}")
    if status == 410:
        return ListExpired(f"{what}: list continuation expired (410): {detail}")
    if status == 409:
        return conflict(f"{what}: HTTP 409: {detail}")
    if status == 429 or status >= 500:
        wait = _retry_after(exc)
        if wait is not None:
            level = _header(exc, PF_PRIORITY_LEVEL_HEADER)
            where = f" (priority level {level})" if level else ""
            return Throttled(f"{what}: HTTP {status}: {detail}{where}", retry_after=wait)
        return ApiUnavailable(f"{what}: HTTP {status}: {detail}")
    if status == 404:
        return NotFound(f"{what}: not found: {detail}")
    return ApiRequestFailed(f"{what}: HTTP {status}: {detail}")


@contextlib.contextmanager
def translate_api_errors(what: str) -> Iterator[None]:
    """Library exceptions become migplan errors here (api_error), with the request that failed in the message."""
    try:
        yield
    except ApiException as exc:
        raise api_error(exc, what) from exc
    except (urllib3.exceptions.HTTPError, ConnectionError, TimeoutError, OSError) as exc:
        raise ApiUnreachable(f"{what}: {type(exc).__name__}: {exc}") from exc


class Throttled(ApiUnavailable):
    """429 or 5xx with a Retry-After header: the server said when to come back (retried after exactly that)."""

    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def _retry_after(exc: ApiException) -> float | None:
    """Retry-After in whole seconds as client-go reads it, or None; a value past any integer is no value."""
    try:
        return retry_after_seconds(exc)
    except (OverflowError, ValueError):
        return None


def _header(exc: ApiException, name: str) -> str | None:
    for key, value in (exc.headers or {}).items():
        if str(key).lower() == name.lower():
            return str(value)[:64]  # a UID; never more than a line of someone else's header
    return None


def _api_message(exc: ApiException) -> str:
    try:
        body = orjson.loads(exc.body or b"{}")
        return str(body.get("message") or exc.reason)
    except orjson.JSONDecodeError:
        return str(exc.reason or exc.body)


def _retryable(exc: BaseException) -> bool:
    # 409 means our view is stale: repeating the same write cannot succeed; the next cycle
    # re-observes. Everything else transient (429, 5xx, resets, timeouts, expired continue) is
    # worth another try.
    return isinstance(exc, Transient) and not isinstance(exc, ApiConflict)


def with_retries(fn: Callable[[], T], *, attempts: int = 4) -> T:
    """Call fn, retrying retryable Transient errors: after the server's Retry-After when it sent one
    (up to RETRY_AFTER_MAX_RETRIES retries, like client-go), else with exponential backoff (0.2 s
    doubling, max 3 s, `attempts` calls in all). No wait outlasts the cycle's deadline."""
    backoff = wait_exponential(multiplier=0.2, max=3.0)

    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        seconds = min(exc.retry_after, RETRY_AFTER_CAP) if isinstance(exc, Throttled) else backoff(state)
        left = deadline.remaining()
        return max(0.0, seconds if left is None else min(seconds, left))

    def stop(state: RetryCallState) -> bool:
        exc = state.outcome.exception() if state.outcome else None
        limit = RETRY_AFTER_MAX_RETRIES + 1 if isinstance(exc, Throttled) else attempts
        return state.attempt_number >= limit

    # The first attempt runs bare (a cycle's thousands of writes nearly all succeed at once, and tenacity's
    # bookkeeping costs as much as a small request); a retryable failure is then replayed as the loop's own
    # first attempt, so waits, stops and the error raised are exactly the loop's.
    try:
        return fn()
    except Exception as exc:
        if not _retryable(exc):
            raise
        first: Exception | None = exc

    def attempt() -> T:
        nonlocal first
        if first is not None:
            failed, first = first, None
            raise failed
        return fn()

    wrapped = retry(retry=retry_if_exception(_retryable), stop=stop, wait=wait, reraise=True)(attempt)
    return wrapped()


def _append(items: list[Mapping[str, Any]], obj: Mapping[str, Any]) -> None:
    items.append(obj)


MAX_CONTINUE_TOKEN = 64 * 1024  # bytes: the API server's tokens are a few hundred (base64 of rv + start key)
_HINT_WINDOW = MAX_CONTINUE_TOKEN + 4096  # where a list's metadata ends, if the server writes it first


class ListUnreadable(ApiUnavailable):
    """A LIST answer that is not a Kubernetes list (not JSON, items not objects, a token that is not a string):
    a cut or garbled answer, treated as the server failing (retried, then the cycle's error)."""


def read_list_page(
    data: bytes, what: str, shape: kubeshapes.PageShape | None = None
) -> tuple[list[dict[str, Any]], str | None]:
    """The items and continue token of one raw LIST page, checked: never a crash on what a proxy or a hostile
    server sends. An item that is not an object, a non-list `items`, a token that is not a string or is
    longer than MAX_CONTINUE_TOKEN is ListUnreadable (MP554) naming the list; what is inside each item is
    kube/observe.py's to read (it reads every field defensively).

    With a `shape` (kube/shapes.py), each item holds only the fields migplan reads of that kind, decoded typed
    and pruned (a fraction of the time and memory of the full decode). A page the typed decode refuses or cannot
    be trusted with (shapes.decode_page says when) is decoded in full here instead: the same items, the same
    errors as without a shape."""
    doc: Any = kubeshapes.decode_page(data, shape) if shape is not None else None
    if doc is None:
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise ListUnreadable(f"{what}: the answer is not JSON ({exc}; {len(data)} bytes)") from None
    if not isinstance(doc, dict):
        raise ListUnreadable(f"{what}: the answer is not a list object but {type(doc).__name__}")
    items = doc.get("items")
    if items is None:
        items = []
    elif not isinstance(items, list):
        raise ListUnreadable(f"{what}: items is {type(items).__name__}, not a list")
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ListUnreadable(f"{what}: item {i} is {type(item).__name__}, not an object")
    meta = doc.get("metadata")
    cont = meta.get("continue") if isinstance(meta, dict) else None
    if cont is not None and not isinstance(cont, str):
        raise ListUnreadable(f"{what}: metadata.continue is {type(cont).__name__}, not a string")
    if cont is not None and len(cont) > MAX_CONTINUE_TOKEN:
        raise ListUnreadable(f"{what}: metadata.continue is {len(cont)} characters (at most {MAX_CONTINUE_TOKEN})")
    return items, cont or None


def continue_hint(data: bytes) -> str | None:
    """The continue token of a raw LIST page read from its head alone, or None.

    The API server writes a list's `metadata` before its `items` (the ListMeta field comes before Items in
    every Go list type, and encoding/json keeps struct order), so the token is in the first bytes and the next
    page can be asked for before this one is decoded. Only a hint: the caller uses the page fetched with it
    only if it equals the token of the fully decoded page (read_list_page), so a server writing another order,
    or an `items` key nested in the metadata, costs one wasted request, never a wrong page."""
    end = data.find(b'"items":', 0, _HINT_WINDOW)
    if end < 0:
        return None
    head = data[:end].rstrip()
    if not head.endswith(b","):
        return None
    try:
        doc = orjson.loads(head[:-1] + b"}")
    except orjson.JSONDecodeError:
        return None
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    cont = meta.get("continue") if isinstance(meta, dict) else None
    return cont if isinstance(cont, str) and 0 < len(cont) <= MAX_CONTINUE_TOKEN else None


class _Prefetcher:
    """At most one page fetched ahead, in one worker thread that runs in the caller's context (so the cycle's
    deadline, a ContextVar, cuts its request too). `take(token)` returns the page fetched for exactly that
    token, else fetches it now; leaving the block waits for a page still in flight (its connection goes back to
    the pool) and drops it."""

    def __init__(self, fetch: Callable[[str | None], bytes]) -> None:
        self._fetch = fetch
        self._pool: ThreadPoolExecutor | None = None
        self._ahead: tuple[str, Future[bytes]] | None = None

    def __enter__(self) -> _Prefetcher:
        return self

    def ask(self, token: str) -> None:
        self._drop()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="migplan-list")
        ctx = contextvars.copy_context()
        self._ahead = (token, self._pool.submit(ctx.run, self._fetch, token))

    def take(self, token: str) -> bytes:
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead[0] == token:
            return ahead[1].result()
        if ahead is not None:
            self._ahead = ahead
            self._drop()
        return self._fetch(token)

    def _drop(self) -> None:
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            with contextlib.suppress(Exception):
                ahead[1].result()

    def __exit__(self, *exc: object) -> None:
        self._drop()
        if self._pool is not None:
            self._pool.shutdown(wait=True)


def list_resource_version(data: bytes, *, whole: bool = False) -> str | None:
    """A raw LIST page's metadata.resourceVersion, read from its head (continue_hint says why the metadata comes
    first); with `whole`, from the whole page when the head does not have it. None when it is not a string."""
    doc: Any = None
    end = data.find(b'"items":', 0, _HINT_WINDOW)
    head = data[:end].rstrip() if end >= 0 else b""
    if head.endswith(b","):
        with contextlib.suppress(orjson.JSONDecodeError):
            doc = orjson.loads(head[:-1] + b"}")
    if not isinstance(doc, dict) and whole:
        with contextlib.suppress(orjson.JSONDecodeError):
            doc = orjson.loads(data)
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
    return rv if isinstance(rv, str) and rv else None


class _RvTap:
    """A raw LIST answer whose `data`, when read (cluster._drain), leaves the page's resourceVersion in `seen`:
    the watch that follows a full LIST starts from it (every page of one list carries the same)."""

    def __init__(self, resp: Any, seen: list[str | None]) -> None:
        self._resp = resp
        self._seen = seen

    @property
    def data(self) -> bytes:
        data: bytes = self._resp.data
        self._seen.append(list_resource_version(data))
        return data

    def release_conn(self) -> None:
        self._resp.release_conn()


class _Listed(Generic[R]):
    """What a full LIST read for a watch-fed cache: entries by uid, and any object without one (loose)."""

    def __init__(self) -> None:
        self.entries: dict[informer.Uid, informer.Entry[R]] = {}
        self.loose: list[informer.Entry[R]] = []


def _node_entry(obj: Mapping[str, Any]) -> tuple[str, ObservedNode]:
    node = kubeobserve.node_from_json(obj)
    return str(node.name), node


# A node's label values repeat across the fleet (GPU Feature Discovery's product, memory and counts, the MIG config
# names): a watch-fed node cache keeps each once for all nodes, not once per node. Only label values (at most 63
# characters for the API server); the table starts again past this many values (some 4 MB at most), so values that
# change with every write cannot make it grow without end.
NODE_LABEL_VALUES = 1 << 15


class _NodeLabels:
    """Equal label values of the cached nodes kept once (see NODE_LABEL_VALUES). Read by the node watch's thread and
    by a cycle's relist: one dict operation at a time (atomic), and sharing an equal str is never wrong."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def entry(self, obj: Mapping[str, Any]) -> tuple[str, ObservedNode]:
        """_node_entry of the node, its label values taken from the table: the same node, equal values."""
        meta = obj.get("metadata")
        labels = meta.get("labels") if type(meta) is dict else None
        if type(meta) is dict and type(labels) is dict and labels:  # as a decoder makes them; anything else as it is
            values = self.values
            if len(values) >= NODE_LABEL_VALUES:
                values.clear()
            shared = {k: values.setdefault(v, v) if type(v) is str and len(v) <= 63 else v for k, v in labels.items()}
            obj = {**obj, "metadata": {**meta, "labels": shared}}
        return _node_entry(obj)


def _text(resp: Any) -> str:
    """A raw answer read as text (a pod log): UTF-8, an undecodable byte replaced rather than failing the read."""
    return _drain(resp).decode("utf-8", errors="replace")


def _drain(resp: Any) -> bytes:
    """Read a raw (`_preload_content=False`) response to the end and hand its connection back to the
    pool; without this every request opens a new connection (and a new TLS handshake)."""
    try:
        return bytes(resp.data)
    finally:
        resp.release_conn()


class KubeCluster:
    """Observe and apply through the official client (one ApiClient, reused across cycles)."""

    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        page_size: int = DEFAULT_PAGE_SIZE,
        request_timeout: tuple[float, float] = REQUEST_TIMEOUT,
        remember_parses: bool = True,
        watch: bool = False,
    ) -> None:
        self.api_client = api_client
        self.request_timeout = request_timeout
        self.max_log_reads = MAX_LOG_READS
        # Raw requests through this ApiClient, not the generated API classes (rawapi.py says why).
        self.core = rawapi.CoreV1(api_client)
        self.apps = rawapi.AppsV1(api_client)
        self.custom = rawapi.CustomObjects(api_client)
        self.policy = rawapi.PolicyV1(api_client)
        self.resource = rawapi.ResourceV1(api_client)
        self.page_size = page_size
        # In-sync cycles: a node or pod whose (uid, resourceVersion) the last observation saw is not parsed
        # again (kubeobserve.ParseMemo says why that key is exact). Only the parse of one object is
        # remembered; everything that reads several objects or the clock is computed every cycle.
        # `remember_parses=False` (a process that observes once, `reconcile --once`): nothing to reuse, so
        # nothing is kept. `watch=True` keeps nothing either: the watch-fed caches keep every node's and pod's record
        # and a relist takes the unchanged ones from them (_watched, WatchCache.kept); a memo would hold the same
        # objects under a second set of keys.
        keep = remember_parses and not watch
        self.node_memo = kubeobserve.ParseMemo(kubeobserve.node_from_json, keep=keep)
        # One observation's equal pod parts kept once (kubeobserve.Shared): a fresh table every observation.
        self.pod_parts = kubeobserve.Shared()
        self.pod_memo = kubeobserve.ParseMemo(
            functools.partial(kubeobserve.gpu_pod_from_json, shared=self.pod_parts), keep=keep
        )
        # `watch=True` (`migplan run` only): nodes and pods from watch-fed caches, used by a cycle only when known
        # fresh, else listed as without them (kube/informer.py; _watched). Their pods' equal parts are kept once
        # in a table of their own, new at every full list (the caches outlive observations).
        self.node_cache: informer.WatchCache[ObservedNode] | None = None
        self.pod_cache: informer.WatchCache[kubeobserve.PodRecord] | None = None
        self._cache_parts = kubeobserve.CacheParts()
        self._node_labels = _NodeLabels()  # the node cache's label values, kept once
        if watch:
            self.node_cache = informer.WatchCache(
                kind="Node",
                open_watch=functools.partial(self._open_watch, "watch nodes", self.core.list_node),
                read=self._node_labels.entry,
                expired=ListExpired,
            )
            self.pod_cache = informer.WatchCache(
                kind="Pod",
                open_watch=functools.partial(self._open_watch, "watch pods", self.core.list_pod_for_all_namespaces),
                read=self._pod_entry,
                expired=ListExpired,
            )
        self.relists = 0  # full node or pod lists made while watching (the caches were not fresh): for tests, logs

    @classmethod
    def from_kubeconfig(
        cls,
        path: str | None = None,
        *,
        context: str | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
        request_timeout: tuple[float, float] = REQUEST_TIMEOUT,
        remember_parses: bool = True,
        watch: bool = False,
    ) -> KubeCluster:
        api_client = TimeoutApiClient(load_kube_config(path, context=context))
        return cls(
            api_client,
            page_size=page_size,
            request_timeout=request_timeout,
            remember_parses=remember_parses,
            watch=watch,
        )

    @classmethod
    def in_cluster(cls, *, page_size: int = DEFAULT_PAGE_SIZE) -> KubeCluster:
        cfg = client.Configuration()
        try:
            config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        except config.ConfigException as exc:
            raise KubeconfigUnusable(f"in-cluster configuration: {_first_line(exc)}") from exc
        return cls(TimeoutApiClient(cfg), page_size=page_size)

    def stop_watching(self) -> None:
        """End the watch-fed caches' threads (a cycle after this lists, and watches again)."""
        for cache in (self.node_cache, self.pod_cache):
            if cache is not None:
                cache.stop()

    def close(self) -> None:
        self.stop_watching()
        self.api_client.close()  # type: ignore[no-untyped-call]

    # --- observe ----------------------------------------------------------------------------------

    def _pages(self, what: str, fn: Callable[..., Any], **kwargs: Any) -> Iterator[Mapping[str, Any]]:
        """Every item of a paginated LIST; an expired continue token restarts the list once."""
        items: list[Mapping[str, Any]] = self._fold(what, fn, list, _append, **kwargs)
        return iter(items)

    def _fold(
        self,
        what: str,
        fn: Callable[..., Any],
        start: Callable[[], S],
        add: Callable[[S, Any], object],
        *,
        shape: kubeshapes.PageShape | None = None,
        **kwargs: Any,
    ) -> S:
        """`add(acc, item)` for every item of a paginated LIST, page by page, into `start()`; a retried
        list (expired continue token, transient error) starts again from a fresh `start()`. Each
        page's raw JSON is dropped once its items are added, so a caller that keeps compact values
        never holds the whole list's raw objects. With a `shape`, items hold only the fields it keeps
        (read_list_page)."""

        def fetch(cont: str | None) -> bytes:
            with translate_api_errors(what):
                return _drain(
                    fn(
                        limit=self.page_size,
                        _continue=cont,
                        _preload_content=False,
                        _request_timeout=self.request_timeout,
                        **kwargs,
                    )
                )

        def collect() -> S:
            acc = start()
            with _Prefetcher(fetch) as pages:
                data = fetch(None)
                while True:
                    # The next page is asked for before this one is decoded (its token is read from the
                    # page's head), so the API server's time for it overlaps with ours for this one.
                    ahead = continue_hint(data)
                    if ahead is not None:
                        pages.ask(ahead)
                    items, cont = read_list_page(data, what, shape)
                    del data
                    for item in items:
                        add(acc, item)
                    del items
                    if not cont:
                        return acc
                    data = pages.take(cont)

        return with_retries(collect)

    def _one(self, what: str, fn: Callable[..., Any], name: str, **kwargs: Any) -> Mapping[str, Any] | None:
        for obj in self._pages(what, fn, field_selector=f"metadata.name={name}", **kwargs):
            if (obj.get("metadata") or {}).get("name") == name:
                return obj
        return None

    def list_objects(self, what: str, fn: Callable[..., Any], **kwargs: Any) -> Iterator[Mapping[str, Any]]:
        """Every item of a paginated LIST as raw JSON (timeouts, retries and errors as for observe)."""
        return self._pages(what, fn, **kwargs)

    def find_one(self, what: str, fn: Callable[..., Any], name: str, **kwargs: Any) -> Mapping[str, Any] | None:
        """The object named `name`, by a LIST with a metadata.name field selector (no GET), or None."""
        return self._one(what, fn, name, **kwargs)

    def observe(self, ops: GpuOperatorSettings) -> ObservedState:
        self.node_memo.begin()
        self.pod_memo.begin()
        self.pod_parts.begin()
        node_memo = self.node_memo

        def add_node(nodes: dict[str, ObservedNode], obj: Mapping[str, Any]) -> None:
            node = node_memo(obj)
            nodes[node.name] = node

        # Both collections' resourceVersions of now are read first: while the cycle waits for the nodes' watch to
        # reach its own, the pods' watch reaches its own too.
        node_target = self._target(self.node_cache, "list nodes", self.core.list_node)
        pod_target = self._target(self.pod_cache, "list pods", self.core.list_pod_for_all_namespaces)
        if self.node_cache is not None:
            nodes = {
                n.name: n
                for n in self._watched(
                    self.node_cache,
                    node_target,
                    "list nodes",
                    self.core.list_node,
                    self._node_labels.entry,
                    kubeshapes.NODES,
                )
            }
        else:
            nodes = self._fold("list nodes", self.core.list_node, dict, add_node, shape=kubeshapes.NODES)
        cp_obj = self._one(
            f"list clusterpolicies {ops.cluster_policy}",
            self.custom.list_cluster_custom_object,
            ops.cluster_policy,
            group=CP_GROUP,
            version=CP_VERSION,
            plural=CP_PLURAL,
        )
        ds_obj = self._one(
            f"list daemonsets {ops.namespace}/{ops.device_plugin_daemonset}",
            self.apps.list_namespaced_daemon_set,
            ops.device_plugin_daemonset,
            namespace=ops.namespace,
        )
        failed = kubeobserve.failed_nodes(nodes)

        def sorter() -> kubeobserve.PodSorter:
            return kubeobserve.PodSorter(
                ops,
                failed=failed,
                daemonset=ds_obj is not None,
                device_plugin_log=self._quote_log,
                mig_manager_log=self._mig_manager_reason,
                max_log_reads=self.max_log_reads,
                gpu_pod=self.pod_memo,
            )

        if self.pod_cache is not None:
            pods = sorter()
            for record in self._watched(
                self.pod_cache,
                pod_target,
                "list pods",
                self.core.list_pod_for_all_namespaces,
                self._pod_entry,
                kubeshapes.PODS,
            ):
                pods.add_record(record)
        else:
            pods = self._fold(
                "list pods",
                self.core.list_pod_for_all_namespaces,
                sorter,
                kubeobserve.PodSorter.add,
                shape=kubeshapes.PODS,
            )
        pdbs = self._pdbs()
        state = kubeobserve.observed_from_parts(
            ops,
            pdbs=pdbs,
            resource_slices=self._resource_slices(),
            resource_claims=self._dra_list("list resourceclaims", self.resource.list_resource_claim_for_all_namespaces),
            gpu_clusters=self._dra_list(
                "list gpuclusters",
                self.custom.list_cluster_custom_object,
                group=CP_GROUP,
                version=kubeobserve.GPUCLUSTER_VERSION,
                plural="gpuclusters",
            ),
            dra_drivers=self._dra_drivers(),
            nodes=nodes,
            pods=pods,
            cluster_policy=cp_obj,
            daemonset=ds_obj,
            config_map=lambda name: self._one(
                f"list configmaps {ops.namespace}/{name}",
                self.core.list_namespaced_config_map,
                name,
                namespace=ops.namespace,
            ),
        )
        return dataclasses.replace(state, device_classes=self._device_classes())

    # --- the watch-fed caches of `migplan run` (kube/informer.py) ------------------------------------

    def _pod_entry(self, obj: Mapping[str, Any]) -> tuple[str, kubeobserve.PodRecord] | None:
        parts = self._cache_parts
        record = kubeobserve.pod_record(
            obj, functools.partial(kubeobserve.gpu_pod_from_json, shared=parts), shared=parts
        )
        return None if record.holds_nothing() else (record.key, record)

    def _open_watch(self, what: str, fn: Callable[..., Any], rv: str) -> Any:
        """A watch from `rv` with bookmarks, for informer.WATCH_SECONDS; its raw stream, unread. The read timeout
        covers the whole watch (the server answers at once, then sends a bookmark before it ends)."""
        connect, read = self.request_timeout
        with translate_api_errors(f"{what} from resourceVersion {rv}"):
            return fn(
                watch=True,
                allow_watch_bookmarks=True,
                resource_version=rv,
                timeout_seconds=informer.WATCH_SECONDS,
                _preload_content=False,
                _request_timeout=(connect, informer.WATCH_SECONDS + read),
            )

    def _current_rv(self, what: str, fn: Callable[..., Any]) -> str | None:
        """The collection's resourceVersion now: a LIST of one item, which the API server answers with the
        list's resourceVersion (a consistent read, so every write made before it is at or below it)."""

        def fetch() -> str | None:
            with translate_api_errors(f"{what} (limit=1, for its resourceVersion)"):
                data = _drain(fn(limit=1, _preload_content=False, _request_timeout=self.request_timeout))
            return list_resource_version(data, whole=True)

        return with_retries(fetch)

    def _target(self, cache: informer.WatchCache[Any] | None, what: str, fn: Callable[..., Any]) -> str | None:
        """The resourceVersion a watch-fed cache must reach to serve this cycle (None: no cache, or one that cannot
        serve: the cycle lists)."""
        return self._current_rv(what, fn) if cache is not None and cache.broken is None else None

    def _watched(
        self,
        cache: informer.WatchCache[R],
        target: str | None,
        what: str,
        fn: Callable[..., Any],
        read: Callable[[Mapping[str, Any]], tuple[str, R] | None],
        shape: kubeshapes.PageShape | None = None,
    ) -> list[R]:
        """The collection's records in LIST order: from the cache when it has reached the collection's
        resourceVersion of now (waiting for it at most informer.FRESH_WAIT, never past the cycle's deadline),
        else from a full LIST that seeds the cache again (a new watch from that list's resourceVersion)."""
        if target is not None:
            left = deadline.remaining()
            wait = informer.FRESH_WAIT if left is None else min(informer.FRESH_WAIT, max(left / 4, 0.0))
            view = cache.view(target, wait)
            if view is not None:
                return view
        self.relists += 1
        cache.stop()
        if cache is self.pod_cache:
            self._cache_parts = kubeobserve.CacheParts()  # a new table: the old one holds what deleted pods shared
        seen: list[str | None] = []

        def listing(**kwargs: Any) -> _RvTap:
            return _RvTap(fn(**kwargs), seen)

        def add(acc: _Listed[R], obj: Mapping[str, Any]) -> None:
            meta = obj.get("metadata")
            uid = meta.get("uid") if isinstance(meta, Mapping) else None
            rv = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
            if isinstance(uid, str) and uid and isinstance(rv, str):
                # uid and resourceVersion as the cache keeps them (informer.compact_uid, compact_rv), made once
                at, version = informer.compact_uid(uid), informer.compact_rv(rv)
                made = cache.kept_at(at, version) or read(obj)
                if made is not None:
                    acc.entries[at] = (version, made[0], made[1])
                return
            made = cache.kept(uid, rv) or read(obj)
            if made is not None:  # never from a real server: listed and used, but the cache cannot follow it
                acc.loose.append((str(rv), made[0], made[1]))

        listed = self._fold(what, listing, _Listed[R], add, shape=shape)
        if not listed.loose:
            cache.seed(listed.entries, (seen[-1] if seen else None) or target)
        return [e[2] for e in sorted((*listed.entries.values(), *listed.loose), key=lambda e: e[1])]

    def _device_classes(self) -> tuple[ObservedDeviceClass, ...] | None:
        """Every DeviceClass (cluster-scoped, paginated; few in any cluster); None on a server without
        resource.k8s.io/v1 (404), where migplan then writes none."""
        try:
            listed = self._pages("list deviceclasses", self.resource.list_device_class)
            return tuple(c for c in map(kubedeviceclasses.from_json, listed) if c is not None)
        except NotFound:
            return None

    def _pdbs(self) -> list[Mapping[str, Any]]:
        """PodDisruptionBudgets, to name the ones blocking a drain. Without the right to list them (an RBAC of
        an older release) or on a server without policy/v1 they are unknown, not an error: the API server
        enforces them on every eviction anyway."""
        try:
            return list(
                self._pages("list poddisruptionbudgets", self.policy.list_pod_disruption_budget_for_all_namespaces)
            )
        except ApiRequestFailed:
            return []

    def _dra_list(self, what: str, fn: Callable[..., Any], **kwargs: Any) -> list[Mapping[str, Any]]:
        """A paginated list of a DRA kind (resource.k8s.io/v1, the GPU Operator's GPUCluster); [] on a server that
        does not serve it (404: no DRA there, or a GPU Operator without GPUCluster)."""
        try:
            return list(self._pages(what, fn, **kwargs))
        except NotFound:
            return []

    def _dra_drivers(self) -> list[DraDriverConfig]:
        """The kubelet-plugin DaemonSets of NVIDIA's DRA driver installed by its own chart (listed cluster-wide by
        the chart's label, paginated), each with the nodes its pods run on (its pods listed by its selector)."""
        out: list[DraDriverConfig] = []
        for ds in self._pages(
            "list daemonsets (NVIDIA DRA driver)",
            self.apps.list_daemon_set_for_all_namespaces,
            label_selector=kubeobserve.DRA_DRIVER_LABEL_SELECTOR,
        ):
            if not kubeobserve.is_dra_kubelet_plugin(ds):
                continue
            meta = ds.get("metadata") or {}
            namespace = meta.get("namespace")
            selector = kubeobserve.dra_driver_pod_selector(ds)
            nodes: set[str] = set()
            pods: list[DraPluginPod] = []
            if selector is not None and isinstance(namespace, str):
                for pod in self._pages(
                    f"list pods {namespace} ({selector})",
                    self.core.list_namespaced_pod,
                    namespace=namespace,
                    label_selector=selector,
                ):
                    node = (pod.get("spec") or {}).get("nodeName")
                    if isinstance(node, str) and node:
                        nodes.add(node)
                    plugin = kubeobserve.dra_plugin_pod(pod)
                    if plugin is not None:
                        pods.append(plugin)
            out.append(kubeobserve.dra_driver_from_json(ds, nodes, pods))
        return out

    def _resource_slices(self) -> list[Mapping[str, Any]]:
        """The ResourceSlices of NVIDIA's DRA driver (resource.k8s.io/v1, paginated, the server filtering on
        `spec.driver`). A server without that API (before 1.34, or with DRA off) answers 404: no DRA there,
        every node on the device-plugin path. A 403 is an error like any other list: the RBAC of deploy/ grants
        it, and a controller that cannot see DRA must not take a DRA node for a device-plugin one."""
        return self._dra_list(
            "list resourceslices",
            self.resource.list_resource_slice,
            field_selector=f"spec.driver={kubeobserve.DRA_DRIVER}",
        )

    def _config_map(self, namespace: str, name: str) -> ConfigMapState | None:
        obj = self._one(
            f"list configmaps {namespace}/{name}", self.core.list_namespaced_config_map, name, namespace=namespace
        )
        return kubeobserve.config_map_from_json(obj) if obj else None

    def _mig_manager_reason(self, pod: Mapping[str, Any]) -> str | None:
        """Why mig-manager set `failed` on its node: the last error line of its log."""
        meta = pod.get("metadata") or {}
        try:
            with translate_api_errors(f"read log of pod {meta.get('namespace')}/{meta.get('name')}"):
                text = _text(
                    self.core.read_namespaced_pod_log(
                        meta.get("name", ""),
                        meta.get("namespace", ""),
                        tail_lines=LOG_TAIL_LINES,
                        _request_timeout=self.request_timeout,
                    )
                )
        except MigplanError:
            return None
        return kubeobserve.mig_manager_error(text)

    def _quote_log(self, pod: Mapping[str, Any]) -> str | None:
        """The device plugin's own error line from a pod that is not Ready (current, else previous run)."""
        meta = pod.get("metadata") or {}
        containers = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or ()]
        container = "nvidia-device-plugin" if "nvidia-device-plugin" in containers else None
        best: str | None = None
        for previous in (False, True):
            try:
                with translate_api_errors(f"read log of pod {meta.get('namespace')}/{meta.get('name')}"):
                    text = _text(
                        self.core.read_namespaced_pod_log(
                            meta.get("name", ""),
                            meta.get("namespace", ""),
                            container=container,
                            previous=previous or None,
                            tail_lines=LOG_TAIL_LINES,
                            _request_timeout=self.request_timeout,
                        )
                    )
            except MigplanError:
                continue  # a log we cannot read is not worth failing the observation for
            line = kubeobserve.quote_log(text, LAYOUT_REFUSALS)
            if line and any(r in line for r in LAYOUT_REFUSALS):
                return line
            best = best or line
        return best

    # --- apply ------------------------------------------------------------------------------------

    def apply(self, change: Change, *, dry_run: bool = False) -> None:
        """Send the one write this Change stands for (no-op for UNCHANGED/SKIP)."""
        if not change.writes or change.patch is None:
            return
        if change.kind is Kind.EVICT:
            self._evict(change, dry_run=dry_run)
            return
        if change.kind is Kind.RESTART_DRA_PLUGIN:
            self._delete_plugin_pod(change, dry_run=dry_run)
            return
        body = dict(change.patch)
        kind = change.kind
        dry = "All" if dry_run else None
        parts = change.subject.split("/")
        what = f"{'dry-run ' if dry_run else ''}{change.headline}"

        # Every write: one field manager, dry run when asked, raw response (nothing to deserialise).
        common: dict[str, Any] = {
            "field_manager": FIELD_MANAGER,
            "dry_run": dry,
            "_preload_content": False,
            "_request_timeout": self.request_timeout,
        }

        def send() -> None:
            resp: Any
            with translate_api_errors(what):
                if kind is Kind.MIG_CONFIG_MAP and change.action is Action.CREATE:
                    resp = self.core.create_namespaced_config_map(parts[1], body, **common)
                elif kind is Kind.MIG_CONFIG_MAP:
                    resp = self.core.patch_namespaced_config_map(
                        parts[2], parts[1], body, _content_type=MERGE_PATCH, **common
                    )
                elif kind is Kind.CLUSTER_POLICY:
                    resp = self.custom.patch_cluster_custom_object(
                        CP_GROUP, CP_VERSION, CP_PLURAL, parts[1], body, _content_type=MERGE_PATCH, **common
                    )
                elif kind is Kind.RESTART_DEVICE_PLUGIN:
                    resp = self.apps.patch_namespaced_daemon_set(
                        parts[2], parts[1], body, _content_type=STRATEGIC_MERGE_PATCH, **common
                    )
                elif kind is Kind.DEVICE_CLASS:
                    resp = kubedeviceclasses.send(self.resource, change, common)
                elif kind in (
                    Kind.NODE_MIG_CONFIG,
                    Kind.CORDON,
                    Kind.UNCORDON,
                    Kind.AGENT_LAYOUT,
                    Kind.DRA_PLUGIN_RECORD,
                ):
                    resp = self.core.patch_node(parts[1], body, _content_type=MERGE_PATCH, **common)
                else:  # pragma: no cover - every Kind is handled above
                    raise MigplanError(f"no applier for {kind}")
                _drain(resp)

        with_retries(send)

    def _evict(self, change: Change, *, dry_run: bool) -> None:
        """POST pods/{name}/eviction with the policy/v1 Eviction the Change carries. A pod already gone (404)
        is evicted; a refusal (429 PodDisruptionBudget, 500 several PDBs) is EvictionRefused, not retried here."""
        assert change.patch is not None
        meta = change.patch.get("metadata") or {}
        name, namespace = str(meta.get("name", "")), str(meta.get("namespace", ""))
        what = f"{'dry-run ' if dry_run else ''}evict pod {namespace}/{name}"
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}

        def send() -> None:
            try:
                with translate_api_errors(what):
                    try:
                        resp = self.core.create_namespaced_pod_eviction(
                            name,
                            namespace,
                            body,
                            dry_run="All" if dry_run else None,
                            _preload_content=False,
                            _request_timeout=self.request_timeout,
                        )
                    except ApiException as exc:
                        refusal = _eviction_refusal(exc)
                        if refusal is not None:
                            raise EvictionRefused(f"{what}: {refusal}", pod=f"{namespace}/{name}") from exc
                        raise
                    _drain(resp)
            except NotFound:
                return  # the pod is gone already: what the eviction was for

        with_retries(send)

    def _delete_plugin_pod(self, change: Change, *, dry_run: bool) -> None:
        """DELETE the DRA kubelet-plugin pod the Change names, only if it is still the same pod (DeleteOptions
        preconditions.uid): its DaemonSet creates a new one, whose plugin publishes the node's devices again. A pod
        already gone (404) or already replaced (409, another uid) is the restart done: never a second pod deleted."""
        assert change.patch is not None
        meta = change.patch.get("metadata") or {}
        name, namespace, uid = str(meta.get("name", "")), str(meta.get("namespace", "")), str(meta.get("uid", ""))
        what = f"{'dry-run ' if dry_run else ''}delete pod {namespace}/{name} (restart the DRA kubelet plugin)"
        body = {"preconditions": {"uid": uid}}  # DeleteOptions: delete only this pod, never its successor

        def send() -> None:
            try:
                with translate_api_errors(what):
                    resp = self.core.delete_namespaced_pod(
                        name,
                        namespace,
                        body=body,
                        dry_run="All" if dry_run else None,
                        _preload_content=False,
                        _request_timeout=self.request_timeout,
                    )
                    _drain(resp)
            except (NotFound, ApiConflict):
                return  # gone, or another pod of that name now: the DaemonSet has restarted the plugin already

        with_retries(send)


def _eviction_refusal(exc: ApiException) -> str | None:
    """The API server's refusal of an eviction, in its own words (message and DisruptionBudget causes), for a
    429 or the 500 about several PodDisruptionBudgets (pkg/registry/core/pod/storage/eviction.go); None else."""
    status = int(exc.status or 0)
    try:
        doc = orjson.loads(exc.body or b"{}")
    except orjson.JSONDecodeError:
        doc = {}
    if not isinstance(doc, dict):
        doc = {}
    message = str(doc.get("message") or exc.reason or "")
    causes = [
        str(c.get("message", ""))
        for c in ((doc.get("details") or {}).get("causes") or ())
        if isinstance(c, dict) and c.get("reason", c.get("type")) == "DisruptionBudget"
    ]
    if status == 429 or (status == 500 and "more than one PodDisruptionBudget" in message):
        return "; ".join([message[:300], *(c[:300] for c in causes)])
    return None


if TYPE_CHECKING:

    def _conforms(x: KubeCluster) -> ClusterPort:
        return x
