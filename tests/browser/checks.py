"""What every page of the browser tests can be checked for: targets a finger can hit, text that
can be told from its background."""

from __future__ import annotations

from playwright.sync_api import Page

MIN_TARGET = 40
# Interactive elements smaller than MIN_TARGET px either way. A link inside a sentence is exempt
# (WCAG 2.5.8 "inline"), as is anything not on screen (the skip link until it is focused).
SMALL_TARGETS = """min => [...document.querySelectorAll(
        'a[href], button, summary, input:not([type=hidden]), select, textarea, [role=switch]')]
    .filter(el => el.getClientRects().length && !el.closest('p'))
    .map(el => [el, el.getBoundingClientRect()])
    .filter(([el, r]) => r.right > 0 && r.bottom > 0 && (r.width < min || r.height < min))
    .map(([el, r]) => `${el.tagName} "${(el.textContent || el.name).trim()}" `
                      + `${Math.round(r.width)}x${Math.round(r.height)}`)"""
# WCAG 2.x contrast of every visible piece of text against the background it sits on (4.5:1,
# 3:1 for large text), and of the borders of form fields and the switch's track (3:1).
LOW_CONTRAST = """() => {
    const rgb = c => c.match(/[\\d.]+/g).map(Number);
    const channel = v => (v /= 255) <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
    const lum = ([r, g, b]) => 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b);
    const ratio = (x, y) => {
        const [a, b] = [lum(x), lum(y)].sort((p, q) => q - p);
        return (a + 0.05) / (b + 0.05);
    };
    const backdrop = el => {
        for (let e = el; e; e = e.parentElement) {
            const c = rgb(getComputedStyle(e).backgroundColor);
            if (c.length < 4 || c[3] > 0) return c;
        }
        return [255, 255, 255];
    };
    const shown = el => el.getClientRects().length && getComputedStyle(el).visibility !== 'hidden'
        && !el.closest('[disabled], .disabled, [aria-disabled=true]');
    const low = [];
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    const seen = new Set();
    while (walker.nextNode()) {
        const el = walker.currentNode.parentElement;
        if (!walker.currentNode.textContent.trim() || seen.has(el) || !shown(el)) continue;
        seen.add(el);
        const style = getComputedStyle(el);
        const size = parseFloat(style.fontSize), bold = Number(style.fontWeight) >= 700;
        const need = size >= 24 || (bold && size >= 18.66) ? 3 : 4.5;
        const got = ratio(rgb(style.color), backdrop(el));
        if (got < need) low.push(`text "${walker.currentNode.textContent.trim().slice(0, 20)}" `
                                 + `${got.toFixed(2)} < ${need}`);
    }
    for (const el of document.querySelectorAll(
            'input:not([type=hidden]), select, textarea, .switch-track')) {
        if (!shown(el)) continue;
        const style = getComputedStyle(el);
        const edge = el.matches('.switch-track') ? style.backgroundColor : style.borderTopColor;
        const got = ratio(rgb(edge), backdrop(el.parentElement));
        if (got < 3) low.push(`${el.tagName}.${el.className} border ${got.toFixed(2)} < 3`);
    }
    return low;
}"""


def check_targets_and_contrast(page: Page) -> None:
    """No control smaller than MIN_TARGET px either way, no text below the WCAG AA contrast."""
    assert page.evaluate(SMALL_TARGETS, MIN_TARGET) == []
    assert page.evaluate(LOW_CONTRAST) == []
