"""A Scrapy downloader middleware that tells proxybreakerd what a response showed.

proxybreakerd judges a CONNECT tunnel by its bytes: it cannot see the 403, the 429 or the CAPTCHA
page inside TLS. This middleware can. For each response it recognises as a ban, it POSTs a report
to the daemon's admin port (/api/report, docs/daemon.md) naming the site and the proxy username the
request used -- never the password -- so the daemon maps the username's session to the exit that
carried it, opens that (exit, site) pair and closes its live tunnels. The request is then retried
(bounded), and its new connection leaves through another exit.

Settings:

    PROXYBREAKERD_PROXY      the proxy URL set on requests that have none, with the username
                             options: "http://acct-session-s1:pw@127.0.0.1:8118"
    PROXYBREAKERD_ADMIN      the admin URL: "http://127.0.0.1:8119"
    PROXYBREAKERD_CAPTCHA_MARKERS  lower-case strings whose presence in a body means a challenge
                             page (default: "captcha", "cf-chl-", "are you a robot")
    PROXYBREAKERD_RETRIES    how often a reported request is retried (default 2)

Enable it before Scrapy's HttpProxyMiddleware (750): this middleware's process_request sets the
proxy first, and HttpProxyMiddleware then moves the proxy URL's credentials into the
Proxy-Authorization header this middleware's process_response reads the username from:

    DOWNLOADER_MIDDLEWARES = {"proxybreakerd_middleware.ProxybreakerdMiddleware": 740}
"""

import base64
import json
import logging
import urllib.request

logger = logging.getLogger(__name__)

DEFAULT_MARKERS = ("captcha", "cf-chl-", "are you a robot")


class ProxybreakerdMiddleware:
    def __init__(self, proxy, admin, markers, retries):
        self.proxy = proxy
        self.admin = admin.rstrip("/")
        self.markers = tuple(m.lower().encode() for m in markers)
        self.retries = retries

    @classmethod
    def from_crawler(cls, crawler):
        s = crawler.settings
        return cls(
            s.get("PROXYBREAKERD_PROXY", ""),
            s.get("PROXYBREAKERD_ADMIN", "http://127.0.0.1:8119"),
            s.getlist("PROXYBREAKERD_CAPTCHA_MARKERS", DEFAULT_MARKERS),
            s.getint("PROXYBREAKERD_RETRIES", 2),
        )

    def process_request(self, request, spider):
        if self.proxy and "proxy" not in request.meta:
            request.meta["proxy"] = self.proxy
        return None

    def process_response(self, request, response, spider):
        verdict = self.verdict(response)
        if verdict is None:
            return response
        username = self.username(request)
        if username is None:
            return response
        report = {"site": response.url, "username": username, "verdict": verdict}
        retry_after = response.headers.get(b"Retry-After")
        if retry_after and retry_after.isdigit():
            report["retry_after"] = retry_after.decode() + "s"
        result = self.report(report)
        spider.crawler.stats.inc_value("proxybreakerd/reports/" + verdict)
        tries = request.meta.get("proxybreakerd_retries", 0)
        if verdict in ("captcha", "rate_limited") and tries < self.retries:
            logger.info("proxybreakerd: %s on %s (pair %s); retrying", verdict, response.url,
                        result.get("pair_state", "?"))
            retry = request.replace(dont_filter=True)
            retry.meta["proxybreakerd_retries"] = tries + 1
            return retry
        return response

    def verdict(self, response):
        if response.status == 429:
            return "rate_limited"
        if response.status == 403:
            return "forbidden"
        body = response.body[:65536].lower()
        if any(m in body for m in self.markers):
            return "captcha"
        return None

    @staticmethod
    def username(request):
        """The proxy username of the request, from its Proxy-Authorization header: never the password."""
        auth = request.headers.get(b"Proxy-Authorization")
        if not auth or not auth.startswith(b"Basic "):
            return None
        try:
            user_pass = base64.b64decode(auth[6:]).decode()
        except ValueError:
            return None
        return user_pass.split(":", 1)[0]

    def report(self, report):
        req = urllib.request.Request(self.admin + "/api/report", data=json.dumps(report).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                return json.load(resp)
        except Exception as e:  # the crawl goes on without the report
            logger.warning("proxybreakerd: report failed: %s", e)
            return {}
