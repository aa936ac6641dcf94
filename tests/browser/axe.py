"""axe-core in the browser tests: every rule of every impact, on the page as it is now.

axe-core is vendored (tests/browser/vendor/, its MPL-2.0 licence beside it), so a clean clone
runs it with no npm. The pages' Content-Security-Policy runs only same-origin script files, so
the file is not inlined: the page asks for it at a same-origin address that Playwright answers
from the vendored copy, and the policy stays exactly what a person gets.
"""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page

AXE_VERSION = "4.14.1"
AXE_FILE = Path(__file__).parent / "vendor" / f"axe-{AXE_VERSION}.min.js"
# Not a route of the app: answered by Playwright before the request leaves the browser.
AXE_PATH = f"/__tests__/axe-{AXE_VERSION}.min.js"

# The whole document, every rule axe has (best practices included), reported one line each:
# rule id, impact and the elements it found.
RUN = """async () => {
    const result = await axe.run(document, {resultTypes: ['violations']});
    return result.violations.map(v => `${v.id} (${v.impact}): ${v.help} -- `
        + v.nodes.map(n => n.target.join(' ')).join(', '));
}"""


def axe_violations(page: Page) -> list[str]:
    """What axe-core finds wrong on the page as it is now: [] when nothing."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.route(f"**{AXE_PATH}", lambda route: route.fulfill(
            path=AXE_FILE, content_type="text/javascript"))
        page.add_script_tag(url=AXE_PATH)
    return page.evaluate(RUN)
