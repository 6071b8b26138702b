"""Unit tests of the middleware's parsing and judgement (run: /usr/bin/python3 -m unittest, here).

proxyd/clientstest runs them (TestScrapyMiddlewareUnit) and the middleware end to end.
"""

import base64
import unittest

from scrapy.http import HtmlResponse, Request, Response

from proxybreaker_scrapy import (USERNAME_META, ProxybreakerReportMiddleware, daemon_judged_block,
                                 exit_from_proxy_status, username_of)


class ProxyStatusTest(unittest.TestCase):
    def test_next_hop(self):
        for value, want in [
            ('proxybreakerd; next-hop="dc-1"; received-status=200; details="success ok"', "dc-1"),
            ('upstream-cdn; error=none, proxybreakerd; next-hop="a \\"b\\""; details="x"', 'a "b"'),
            ('proxybreakerd; error=proxy_internal_response; details="pool: no healthy exit"', None),
            ('other; next-hop="not-ours"', None),
            ("", None),
            (None, None),
        ]:
            self.assertEqual(exit_from_proxy_status(value), want, value)

    def test_judged(self):
        self.assertTrue(daemon_judged_block('proxybreakerd; next-hop="a"; details="transient pair blocked cloudflare"'))
        self.assertTrue(daemon_judged_block('proxybreakerd; next-hop="a"; details="permanent exit proxy_auth"'))
        self.assertFalse(daemon_judged_block('proxybreakerd; next-hop="a"; details="success ok"'))
        self.assertFalse(daemon_judged_block(""))


class UsernameTest(unittest.TestCase):
    def test_from_meta_never_the_password(self):
        r = Request("https://shop.example/", meta={"proxy": "http://acct-session-42:s3cret@127.0.0.1:8118"})
        self.assertEqual(username_of(r), "acct-session-42")

    def test_from_header(self):
        auth = b"Basic " + base64.b64encode(b"acct-session-7:s3cret")
        r = Request("https://shop.example/", meta={"proxy": "http://127.0.0.1:8118"},
                    headers={"Proxy-Authorization": auth})
        self.assertEqual(username_of(r), "acct-session-7")

    def test_none(self):
        self.assertIsNone(username_of(Request("https://shop.example/")))
        bad = Request("https://shop.example/", headers={"Proxy-Authorization": b"Basic !!!"})
        self.assertIsNone(username_of(bad))

    def test_process_request_keeps_the_username(self):
        mw = ProxybreakerReportMiddleware("http://127.0.0.1:8119", ["CAPTCHA"], [403], True, 1)
        r = Request("https://shop.example/", meta={"proxy": "http://acct-session-9:pw@127.0.0.1:8118"})
        mw.process_request(r, None)
        self.assertEqual(r.meta[USERNAME_META], "acct-session-9")


class VerdictTest(unittest.TestCase):
    def setUp(self):
        self.mw = ProxybreakerReportMiddleware("http://127.0.0.1:8119", ["g-recaptcha", "CAPTCHA"], [403], True, 1)

    def test_verdicts(self):
        u = "https://shop.example/p"
        for resp, want in [
            (Response(u, status=429, headers={"Retry-After": "30"}), ("rate_limited", b"30")),
            (HtmlResponse(u, status=200, body=b'<div class="g-recaptcha"></div>'), ("captcha", None)),
            (HtmlResponse(u, status=403, body=b"<html>Forbidden</html>"), ("forbidden", None)),
            (HtmlResponse(u, status=200, body=b"<html>fine</html>"), (None, None)),
            (HtmlResponse(u, status=404, body=b"<html>gone</html>"), (None, None)),
        ]:
            self.assertEqual(self.mw.verdict(resp), want, resp)


if __name__ == "__main__":
    unittest.main()
