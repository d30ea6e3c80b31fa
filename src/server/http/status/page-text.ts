/**
 * What the status page's script and the console's share: how they show text that a server,
 * upstream or client wrote. It is always set as textContent (never markup), with controls, bidi
 * overrides, zero-width and tag characters written as `<U+XXXX>` so none can disguise a name.
 * Each script includes it at the top of its own function scope.
 */
// No template literals or `${` inside: it lives in a TS template string.
export const PAGE_TEXT_JS = String.raw`  var KEY = 'manifold.status.token';
  var $ = function (id) { return document.getElementById(id); };
  // Controls (not tab or newline), bidi, zero-width, variation selectors and tag characters.
  var UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff\ufe00-\ufe0f]|\udb40[\udc00-\udc7f\udd00-\uddef]/g;
  function show(v) {
    return String(v === undefined || v === null ? '' : v).replace(UNSAFE, function (c) {
      return '<U+' + c.codePointAt(0).toString(16).toUpperCase().padStart(4, '0') + '>';
    });
  }
  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined) e.textContent = show(text);
    if (cls) e.className = cls;
    return e;
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }`;
