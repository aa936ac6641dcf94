// Every page: local times, the toast region, Back that shows the truth, and forms that say
// 已保存 only until they change. No inline script anywhere: the Content-Security-Policy only
// runs files from /static/.
(function () {
  'use strict';

  var NOTICE_SECONDS = 6;

  // Timestamps are stored in UTC; show them in the reader's own time zone.
  htmx.onLoad(function (root) {
    root.querySelectorAll('time[datetime]').forEach(function (el) {
      if (el.title) return;
      el.title = el.textContent;
      el.textContent = new Date(el.dateTime).toLocaleString('zh-CN', {
        year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit'
      });
    });
  });

  // ---- the toast region: feedback that is always in view ----

  function toast() {
    return document.getElementById('toast');
  }

  function clearToast() {
    var region = toast();
    if (region) region.replaceChildren();
  }

  // The same markup as templates/_toast.html, for failures no response body describes.
  function showFailure(text) {
    var region = toast();
    if (!region) return;
    var message = document.createElement('div');
    message.className = 'toast-message error';
    message.setAttribute('role', 'alert');
    var line = document.createElement('p');
    line.textContent = text;
    var close = document.createElement('button');
    close.type = 'button';
    close.className = 'toast-close';
    close.dataset.dismissToast = '';
    close.setAttribute('aria-label', '关闭');
    close.textContent = '×';
    message.append(line, close);
    region.replaceChildren(message);
  }

  // A notice or error is about the last action only. A refresh the page makes by itself after
  // an action ([data-follows]) is not an action: the action's toast stays.
  document.addEventListener('htmx:beforeRequest', function (event) {
    if (event.target.closest('[data-follows]')) return;
    if (!toast() || !toast().contains(event.target)) clearToast();
  });
  // Slow networks: what is being replaced says so (aria-busy; dimmed after a moment by the
  // stylesheet), and the link or button pressed shows it is working (htmx's .htmx-request).
  document.addEventListener('htmx:beforeRequest', function (event) {
    var target = event.detail.target;
    if (target && target !== toast()) target.setAttribute('aria-busy', 'true');
  });
  document.addEventListener('htmx:afterRequest', function (event) {
    var target = event.detail.target;
    if (target) target.removeAttribute('aria-busy');
  });
  document.addEventListener('htmx:responseError', function () {
    showFailure('请求失败:服务暂时不可用,请稍后重试。');
  });
  document.addEventListener('htmx:sendError', function () {
    showFailure('请求没有发出去:请检查网络后重试。');
  });
  document.addEventListener('click', function (event) {
    if (event.target.closest('[data-dismiss-toast]')) clearToast();
  });
  // Notices step aside after a while; errors stay until the next action or 关闭, and so does a
  // notice that offers a link (「去看看」): it must still be there when the person reaches for it.
  document.addEventListener('htmx:load', function (event) {
    var notice = event.target.closest && event.target.closest('#toast .notice');
    if (!notice || notice.querySelector('a')) return;
    setTimeout(function () { notice.remove(); }, NOTICE_SECONDS * 1000);
  });

  // The toast sits over the bottom of the window: the row just acted on (where the focus went)
  // and the row after it, the next one the person is likely to act on, are moved up from under
  // it, so their buttons stay in reach while it shows; never so far that the row acted on
  // leaves the top of the window.
  function clearOfToast() {
    var region = toast();
    var focused = document.activeElement;
    if (!region || !region.firstElementChild || !focused || focused === document.body
        || region.contains(focused)) return;
    var cover = region.getBoundingClientRect();
    var row = focused.closest('li') || focused;
    var box = row.getBoundingClientRect();
    var next = row.nextElementSibling && row.nextElementSibling.getBoundingClientRect();
    var own = box.bottom - cover.top + 8;
    var both = next && next.top < cover.bottom ? next.bottom - cover.top + 8 : own;
    var by = Math.max(own, Math.min(both, box.top));
    if (by > 0 && box.top < cover.bottom) window.scrollBy(0, by);
  }
  document.addEventListener('htmx:afterSettle', function () { setTimeout(clearOfToast, 0); });

  // ---- Back and Forward show what is true now ----

  // A page the browser kept whole in its back/forward cache may be out of date: fetch it again.
  window.addEventListener('pageshow', function (event) {
    if (event.persisted) window.location.reload();
  });

  // ---- 已保存 is about what was saved, not what is selected now ----

  function forgetSaved(event) {
    var form = event.target.closest && event.target.closest('form');
    if (form) form.querySelectorAll('[data-saved]').forEach(function (el) { el.remove(); });
  }
  document.addEventListener('input', forgetSaved);
  document.addEventListener('change', forgetSaved);
})();
