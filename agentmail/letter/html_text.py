"""What a person's HTML shows, as text (DESIGN §3, §10). Pure functions, no I/O.

The HTML is parsed once (lxml, as inscriptis parses it), then, before inscriptis lays it out as
text (paragraphs, lists, tables; no scripts run, nothing fetched):

- what a mail client never displays is removed: ``head``, ``script``, ``style``, ``template``,
  and every element a person cannot see — the ``hidden`` attribute, ``display:none``,
  ``visibility:hidden``, ``mso-hide:all``, ``opacity`` near 0, a font size under 2px,
  ``color`` that does not stand out from the background (white on white, ``transparent``),
  positioned or indented off the screen, clipped, scaled to nothing, or boxed to zero size with
  its overflow hidden. The agent is shown what the person saw, not what was hidden from them;
- a style sheet (``<style>``) that hides text is refused (``mime.Refused``): which elements it
  hides would need a CSS engine, and a guess could show hidden words;
- with ``cut=True``, the quoted history: ``<blockquote>``, Gmail's ``gmail_quote`` and
  ``gmail_attr``, Thunderbird's ``moz-cite-prefix``, Yahoo's ``yahoo_quoted``, and Outlook's
  reply header (``divRplyFwdMsg``/``appendonsend``) with everything after it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from inscriptis import Inscriptis
from lxml.etree import ParserError
from lxml.html import document_fromstring

from .mime import Refused

if TYPE_CHECKING:
    from lxml.html import HtmlElement

_NEVER_SHOWN = {"head", "title", "script", "style", "template", "object", "embed", "iframe", "svg", "math"}
_QUOTE_CLASSES = {"gmail_quote", "gmail_attr", "moz-cite-prefix", "yahoo_quoted", "gmail_extra"}
_REPLY_HEADER_IDS = {"divrplyfwdmsg", "appendonsend"}  # Outlook: its reply header, the original after it
# In a style sheet: the declarations that hide text, which agentmail cannot apply (above).
_SHEET_HIDES = (
    r"(?i)display\s*:\s*none|visibility\s*:\s*(?:hidden|collapse)|mso-hide\s*:\s*all|font-size\s*:\s*0(?![.\d])"
    r"|opacity\s*:\s*(?:0++\.?0*+|\.0++)(?![.\d])|text-indent\s*:\s*-|clip(?:-path)?\s*:|color\s*:\s*transparent"
)
# Possessive (*+, ++) where a run of digits or zeros could otherwise be tried at every split:
# a value of many digits made these searches quadratic or worse.
_LENGTH = r"^(-?(?:\d*+\.)?\d++)\s*+(px|pt|em|rem|%|cm|mm|in|pc|ex|ch|vw|vh)?$"
_SCALED_TO_NOTHING = r"scale[xy]?\(\s*+0*+\.?0*+\s*+[,)]"
_MIN_CONTRAST = 1.25  # WCAG's ratio: white on white is 1.0, #eee on white 1.16, #ddd on white 1.36
_WHITE = (1.0, 1.0, 1.0)
_BLACK = (0.0, 0.0, 0.0)
# The named colours (CSS) a page is likely to hide text with, and the basic ones; a name not
# here is not judged by contrast (every other rule still applies).
_NAMED = {
    "white": "fff", "snow": "fffafa", "ivory": "fffff0", "ghostwhite": "f8f8ff", "whitesmoke": "f5f5f5",
    "floralwhite": "fffaf0", "seashell": "fff5ee", "mintcream": "f5fffa", "azure": "f0ffff",
    "aliceblue": "f0f8ff", "lavenderblush": "fff0f5", "honeydew": "f0fff0", "linen": "faf0e6",
    "oldlace": "fdf5e6", "beige": "f5f5dc", "cornsilk": "fff8dc", "lightyellow": "ffffe0",
    "lemonchiffon": "fffacd", "papayawhip": "ffefd5", "blanchedalmond": "ffebcd", "bisque": "ffe4c4",
    "mistyrose": "ffe4e1", "lavender": "e6e6fa", "gainsboro": "dcdcdc", "lightgray": "d3d3d3",
    "lightgrey": "d3d3d3", "silver": "c0c0c0", "gray": "808080", "grey": "808080", "black": "000",
    "red": "f00", "green": "008000", "blue": "00f", "yellow": "ff0", "navy": "000080",
}  # fmt: skip


def render(html: str, *, cut: bool) -> str:
    """The text a person sees of ``html`` (hidden elements removed; with ``cut``, the quoted
    history too). ``mime.Refused`` for HTML that does not parse or a style sheet that hides."""
    if not html.strip():
        return ""
    try:
        tree = document_fromstring(re.sub(r"^\s*<\?xml[^>]*>", "", html))
        _check_sheets(tree)
        _remove_unseen(tree)
        if cut:
            _remove_history(tree)
        return str(Inscriptis(tree).get_text()).strip("\n")
    except Refused:
        raise
    except (ParserError, ValueError, TypeError, LookupError):  # lxml's answers to hostile markup
        raise Refused("the letter's HTML part does not parse") from None


def link_texts(html: str) -> str:
    """The link targets and image texts of ``html`` (``href``, ``src``, ``alt``), space-separated:
    what a client writes into the text version of an HTML letter."""
    try:
        tree = document_fromstring(html)
    except (ParserError, ValueError, TypeError, LookupError):
        return ""
    return " ".join(str(e.get(a) or "") for e in tree.iter() if isinstance(e.tag, str) for a in ("href", "alt", "src"))


def _check_sheets(tree: HtmlElement) -> None:
    for sheet in tree.iter("style"):
        found = re.search(_SHEET_HIDES, sheet.text_content() or "")
        if found:
            said = " ".join(found.group().split())[:40]
            raise Refused(
                f"the letter's HTML hides text with a style sheet ({said!r}), which agentmail cannot apply; "
                "it is refused rather than shown with text the person did not see"
            )


def _remove_unseen(tree: HtmlElement) -> None:
    """Drop every element a person cannot see (its tail, the text after it, stays)."""
    doomed: list[HtmlElement] = []
    stack: list[tuple[HtmlElement, tuple[float, float, float], tuple[float, float, float] | None]] = [
        (tree, _BLACK, _WHITE)
    ]
    while stack:
        element, color, background = stack.pop()
        tag = element.tag if isinstance(element.tag, str) else ""
        style = _declarations(str(element.get("style") or ""))
        background = _background(element, style, background)
        color = _colour(style.get("color") or str(element.get("color") or "")) or color
        if tag.lower() in _NEVER_SHOWN or _hidden(element, style, color, background):
            doomed.append(element)
            continue
        if background is not None and _contrast(color, background) < _MIN_CONTRAST:
            _blank_own_text(element)  # white on white: the person saw nothing there
        stack.extend((child, color, background) for child in element if isinstance(child.tag, str))
    drop_all(doomed)


def _declarations(style: str) -> dict[str, str]:
    """An inline style's declarations (``key: value``), lowercased; the last of a key wins, as in CSS."""
    found: dict[str, str] = {}
    for declaration in style.lower().split(";"):
        key, colon, value = declaration.partition(":")
        if colon:
            found[key.strip()] = value.replace("!important", "").strip()
    return found


def _hidden(
    element: HtmlElement,
    style: dict[str, str],
    color: tuple[float, float, float],
    background: tuple[float, float, float] | None,
) -> bool:
    if element.get("hidden") is not None:
        return True
    if style.get("display") == "none" or style.get("visibility") in ("hidden", "collapse"):
        return True
    if (
        style.get("mso-hide") == "all"
        or style.get("clip", "auto") != "auto"
        or style.get("clip-path", "none") != "none"
    ):
        return True
    if _number(style.get("opacity", "1"), 1.0) < 0.1 or re.search(_SCALED_TO_NOTHING, style.get("transform", "")):
        return True
    if _tiny(style.get("font-size", "")) or style.get("color") == "transparent":
        return True
    if _px(style.get("text-indent", "")) <= -100:
        return True
    if style.get("position") in ("absolute", "fixed") and any(
        _px(style.get(side, "")) <= -100 for side in ("left", "top", "right", "bottom", "margin-left", "margin-top")
    ):
        return True
    boxed = any(_px(style.get(k, "9999")) <= 1 for k in ("height", "max-height", "width", "max-width", "line-height"))
    return boxed and style.get("overflow", "") == "hidden"


def _blank_own_text(element: HtmlElement) -> None:
    """Remove the text drawn in the element's own colour (its text, its children's tails); the
    children are judged by their own colours."""
    element.text = None
    for child in element:
        child.tail = None


def _number(value: str, default: float) -> float:
    try:
        return float(value.strip().rstrip("%")) / (100 if value.strip().endswith("%") else 1)
    except ValueError:
        return default


def _length(value: str) -> tuple[float, str] | None:
    match = re.match(_LENGTH, value.strip())
    return (float(match.group(1)), match.group(2) or "px") if match else None


def _px(value: str) -> float:
    """A CSS length as pixels, roughly (1em = 16px); 0 for ``0``, a large number when unreadable."""
    length = _length(value)
    if length is None:
        return 10_000.0
    number, unit = length
    scale = {"px": 1.0, "pt": 4 / 3, "em": 16.0, "rem": 16.0, "ex": 8.0, "ch": 8.0, "%": 0.16, "pc": 16.0,
             "in": 96.0, "cm": 37.8, "mm": 3.78, "vw": 10.0, "vh": 10.0}[unit]  # fmt: skip
    return number * scale


def _tiny(font_size: str) -> bool:
    return _length(font_size) is not None and _px(font_size) < 2


def _background(
    element: HtmlElement, style: dict[str, str], inherited: tuple[float, float, float] | None
) -> tuple[float, float, float] | None:
    """The colour behind the element's text: its own, else what it sits on; None when unknown
    (an image, a gradient, a colour name agentmail does not know): contrast is then not judged."""
    value = style.get("background-color") or style.get("background") or str(element.get("bgcolor") or "")
    if not value:
        return inherited
    for word in _words(value):
        colour = _colour(word)
        if colour is not None:
            return colour
    return None


def _words(value: str) -> list[str]:
    """``value`` split at white space that no ``)`` follows before a ``(`` (so ``rgb(1, 2, 3)``
    stays one word), in one pass from the end: a look-ahead for the ``)`` at every space was
    quadratic in a long background."""
    words: list[str] = []
    word: list[str] = []
    inside = False  # a ")" comes after this point before any "("
    for ch in reversed(value.strip()):
        if ch.isspace() and not inside:
            if word:
                words.append("".join(reversed(word)))
                word = []
            continue
        word.append(ch)
        if ch in "()":
            inside = ch == ")"
    words.append("".join(reversed(word)))
    return words[::-1]


def _colour(value: str) -> tuple[float, float, float] | None:
    """#rgb, #rrggbb(aa), rgb()/rgba(), or a name of ``_NAMED``, as 0..1 channels; else None."""
    value = value.strip().lower()
    value = "#" + _NAMED[value] if value in _NAMED else value
    hexes = re.fullmatch(r"#?([0-9a-f]{3}|[0-9a-f]{6}|[0-9a-f]{8})", value) if value.startswith("#") else None
    if hexes:
        digits = hexes.group(1)
        digits = "".join(c * 2 for c in digits) if len(digits) == 3 else digits[:6]
        return (int(digits[0:2], 16) / 255, int(digits[2:4], 16) / 255, int(digits[4:6], 16) / 255)
    func = re.fullmatch(r"rgba?\(\s*([\d.]+%?)[\s,]+([\d.]+%?)[\s,]+([\d.]+%?)(?:[\s,/]+[\d.]+%?)?\s*\)", value)
    if func:
        channels = [_number(c, 0.0) if c.endswith("%") else _number(c, 0.0) / 255 for c in func.groups()]
        return (min(channels[0], 1.0), min(channels[1], 1.0), min(channels[2], 1.0))
    return None


def _luminance(colour: tuple[float, float, float]) -> float:
    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c) for c in colour)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _contrast(a: tuple[float, float, float], b: tuple[float, float, float]) -> float:
    """WCAG 2's contrast ratio, 1 (none) to 21 (black on white)."""
    light, dark = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def _remove_history(tree: HtmlElement) -> None:
    """Drop the quoted history: quote elements, and Outlook's reply header with all after it."""
    doomed: list[HtmlElement] = []
    after: HtmlElement | None = None
    for element in tree.iter():
        if not isinstance(element.tag, str):
            continue
        classes = set(str(element.get("class") or "").lower().split())
        if element.tag.lower() == "blockquote" or classes & _QUOTE_CLASSES:
            doomed.append(element)
        elif after is None and str(element.get("id") or "").lower() in _REPLY_HEADER_IDS:
            after = element
    if after is not None:
        for ancestor in [after, *after.iterancestors()]:
            doomed.extend(ancestor.itersiblings())
        doomed.append(after)
    drop_all(doomed)


def drop_all(doomed: list[HtmlElement]) -> None:
    """Remove each element and what it holds, keeping the text after it (its tail), which joins
    the nearest kept element before it or the parent's own text: what lxml's ``drop_tree`` does
    one element at a time, but each place's text joined once (``drop_tree`` copied it again for
    every dropped sibling: quadratic in many hidden elements or quotes side by side)."""
    gone = set(doomed)
    for parent in dict.fromkeys(p for p in (e.getparent() for e in doomed) if p is not None):
        runs: list[tuple[HtmlElement | None, list[str]]] = [(None, [parent.text or ""])]
        for child in list(parent):
            if child in gone:
                runs[-1][1].append(child.tail or "")
                parent.remove(child)
            else:
                runs.append((child, [child.tail or ""]))
        for owner, texts in runs:
            if len(texts) > 1:
                joined = "".join(texts) or None
                if owner is None:
                    parent.text = joined
                else:
                    owner.tail = joined
