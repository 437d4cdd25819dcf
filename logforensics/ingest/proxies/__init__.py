"""Proxies, load balancers and LLM gateways, as line formats.

They write only `proxy_requests` (one row per request the proxy logged) and
`proxy_events` (one row per failure it reports): never `server_requests` or
engine tables, so a proxy's log creates no instance. `proxy` is the file's
(or kubectl pod's) name; `instance` in `proxy_events` is unknown (None): the
`upstream` column names the backend as the proxy logged it.

Every row says who produced `http_status` (`status_origin`: ``upstream`` — the
backend's own answer passed through; ``proxy`` — the proxy answered itself,
e.g. nginx's 502/504 when the upstream failed; ``unknown``) and whether the
log proves the request reached a backend (`delivery`: ``reached``,
``refused`` — it never got to one, ``unknown``).

`at` is always the END of the request as the proxy saw it (when it logged
it): nginx's ``$time_local`` is already that; for Envoy, HAProxy and Traefik,
which stamp the start, `at` = start + total duration. Subtract
`request_time_s` for the start.

One module a tool; each names the source its text was taken from.
"""
