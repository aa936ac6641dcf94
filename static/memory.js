// 我的记忆: the add dialog (fresh each time), live counts, 保存 disabled when it can only fail,
// the keyboard in an inline edit, and a warning before a list change discards typed text.
(function () {
  'use strict';

  // ---- what the page can be certain the service will refuse ----
  // The service trims content before it checks it. Trimming a superset of what it trims gives a
  // count that is never above the service's, so "over the limit" here is certain; "blank" is
  // only ASCII whitespace, which the service certainly trims.
  var EDGES = /^[\s\x1c-\x1f\x85]+|[\s\x1c-\x1f\x85]+$/g;
  var BLANK = /^[ \t\r\n\f\v]*$/;

  function counted(text) {
    return Array.from(text.replace(EDGES, '')).length;
  }

  function updateCounter(area) {
    var out = document.getElementById(area.dataset.counter);
    if (!out) return;
    var n = counted(area.value);
    var max = Number(area.dataset.max);
    out.textContent = n + ' / ' + max;
    out.classList.toggle('over', n > max);
    // Why 保存 is pale, in words: a red number alone does not say it.
    var why = area.form && area.form.querySelector('[data-why]');
    if (why) {
      why.textContent = n > max ? '超出 ' + (n - max) + ' 字:内容最多 ' + max + ' 字,删减后才能保存。' : '';
    }
  }

  // At the cap (已用 200 / 200, refreshed after every change) a new memory can only be refused:
  // the add dialog says so as it opens, before anything is typed.
  function atTheCap() {
    return document.querySelector('#memory-usage[data-full]') !== null;
  }

  function certainToFail(form) {
    if (form.querySelector('[data-full-note]') && atTheCap()) return true;
    var area = form.querySelector('textarea[data-max]');
    var scope = form.querySelector('[name=scope]');
    var project = form.querySelector('[name=projectKey]');
    return BLANK.test(area.value) || counted(area.value) > Number(area.dataset.max)
      || (scope !== null && scope.value === 'PROJECT' && (project === null || BLANK.test(project.value)));
  }

  function refresh(form) {
    var area = form.querySelector('textarea[data-max]');
    var submit = form.querySelector('button[type=submit]');
    if (!area || !submit) return;
    updateCounter(area);
    submit.disabled = certainToFail(form);
  }

  function guardedForm(el) {
    return el.closest && el.closest('form[data-guard]');
  }

  document.addEventListener('input', function (event) {
    var form = guardedForm(event.target);
    if (form) refresh(form);
  });
  document.addEventListener('change', function (event) {
    var form = guardedForm(event.target);
    if (form) refresh(form);
  });
  // An inline edit form, or the project field of the add dialog, just arrived.
  htmx.onLoad(function (root) {
    var form = guardedForm(root);
    if (form) refresh(form);
    root.querySelectorAll('form[data-guard]').forEach(refresh);
  });

  // ---- a long memory on a phone: its first lines, and 展开 for the rest ----
  // The stylesheet clamps .clamped only on a narrow screen; the button is added only where the
  // text is really cut (measured), and says 收起 once open.

  var NARROW = window.matchMedia('(max-width: 640px)');

  function clamp(root) {
    if (!NARROW.matches) return;
    root.querySelectorAll('li.memory-row > .memory-content').forEach(function (text) {
      if (text.dataset.clampChecked) return;
      text.dataset.clampChecked = '1';
      text.classList.add('clamped');
      if (text.scrollHeight <= text.clientHeight + 1) {
        text.classList.remove('clamped');
        return;
      }
      var toggle = document.createElement('button');
      toggle.type = 'button';
      toggle.className = 'expand';
      toggle.textContent = '展开';
      toggle.setAttribute('aria-expanded', 'false');
      if (text.id) toggle.setAttribute('aria-controls', text.id);
      toggle.addEventListener('click', function () {
        var open = text.classList.toggle('clamped') === false;
        toggle.textContent = open ? '收起' : '展开';
        toggle.setAttribute('aria-expanded', open ? 'true' : 'false');
      });
      text.after(toggle);
    });
  }
  htmx.onLoad(clamp);

  // ---- the add dialog: a fresh one each time it opens ----

  function openAddDialog(dialog) {
    var form = dialog.querySelector('form');
    form.reset();
    dialog.querySelectorAll('[data-reset-empty]').forEach(function (el) { el.replaceChildren(); });
    var full = atTheCap();
    dialog.querySelector('[data-full-note]').hidden = !full;
    form.querySelector('textarea').disabled = full;
    refresh(form);
    dialog.showModal();
  }

  document.addEventListener('click', function (event) {
    var opener = event.target.closest('[data-open-dialog]');
    if (opener) openAddDialog(document.getElementById(opener.dataset.openDialog));
    var closer = event.target.closest('[data-close-dialog]');
    if (closer) closer.closest('dialog').close();
  });
  document.addEventListener('memory-created', function () {
    document.getElementById('memory-dialog').close();
  });

  // ---- keyboard: Escape cancels an inline edit, Ctrl+Enter saves ----

  // (Not by class: htmx keeps a swapped-in row's old class until it settles.)
  document.addEventListener('keydown', function (event) {
    // Escape in a delete confirmation is its 取消, as in an edit.
    var confirming = event.key === 'Escape' && event.target.closest
      && event.target.closest('.confirm-actions');
    if (confirming) {
      event.preventDefault();
      confirming.querySelector('button').click();
      return;
    }
    if (!event.target.matches('textarea')) return;
    var form = event.target.closest('form');
    var cancel = form.querySelector('[data-cancel]');
    if (event.key === 'Escape' && cancel) {
      event.preventDefault();
      cancel.click();
    } else if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      form.querySelector('button[type=submit]').click();
    }
  });

  // ---- where the focus goes when a list or the access log is replaced under it ----
  // The link pressed (下一页, a tab, 更早, 清除…) is gone with the old content. The focus moves to
  // the top of a new page of the list (where it was scrolled to), to the search box after
  // clearing, else to the same link in the new content (a tab, 更早), else its counterpart
  // (较新 on the last page), so the keyboard goes on from where the eyes are.

  var pressed = null;
  document.addEventListener('htmx:beforeRequest', function (event) {
    var elt = event.detail.elt;
    var region = elt.closest && elt.closest('#memory-list, #access-log-body');
    pressed = region && elt.matches('a') && document.activeElement === elt
      ? {text: elt.textContent.trim(), rel: elt.getAttribute('rel'), region: region.id,
         clear: elt.hasAttribute('data-clear-search'), pager: !!elt.closest('.pager')}
      : null;
  });
  document.addEventListener('htmx:afterSettle', function () {
    var was = pressed;
    if (!was || (document.activeElement && document.activeElement !== document.body)) return;
    pressed = null;
    var region = document.getElementById(was.region);
    if (!region) return;
    var links = Array.from(region.querySelectorAll('a'));
    var same = links.find(function (a) { return a.textContent.trim() === was.text; });
    var pager = was.pager && region.querySelector('.pager a');
    var top = region.querySelector('.summary') || region;
    var next = was.clear ? document.getElementById('memory-q')
      : (was.pager && was.region === 'memory-list') ? top : same || pager || top;
    if (!next) return;
    if (!next.matches('a, button, input, select, textarea')) next.setAttribute('tabindex', '-1');
    next.focus({preventScroll: true});
  });

  // ---- the agent's view follows every change, while it is open ----

  document.addEventListener('htmx:confirm', function (event) {
    var panel = event.target.id === 'preview-body' && event.target.closest('details');
    if (panel && !panel.open) event.preventDefault();
  });

  // ---- typed text is never discarded without asking ----

  // A conflict's own words (data-conflict) are unsaved as they arrive: the save was refused.
  function unsaved(area) {
    return area.value !== area.defaultValue || area.closest('form[data-conflict]') !== null;
  }

  function unsavedEdits() {
    return Array.from(document.querySelectorAll('form[data-inline-edit] textarea')).filter(unsaved);
  }

  var pendingRequest = null;
  var pendingFrom = null;

  // Tabs, filters, the search and the pager replace the list's rows, open edits included.
  document.addEventListener('htmx:confirm', function (event) {
    var target = event.detail.target;
    if (!target || (target.id !== 'memory-list' && target.id !== 'memory-results')
        || unsavedEdits().length === 0) return;
    event.preventDefault();
    pendingRequest = event.detail.issueRequest;
    pendingFrom = event.detail.elt;
    document.getElementById('discard-dialog').showModal();
  });

  // The search box and project select show the view the list shows: after 继续编辑 they go back
  // to it (the list kept its view; what was typed into the box was not searched).
  function matchTheList() {
    var shown = document.getElementById('memory-view');
    if (!shown) return;
    var q = document.getElementById('memory-q');
    if (q) q.value = shown.querySelector('[name=q]').value;
    var project = document.getElementById('memory-project');
    if (project) {
      project.value = shown.querySelector('[name=project]').value;
    }
  }

  // A pause in typing after Enter already searched the same words: nothing to fetch (a late
  // answer would also rewrite the address after Back).
  document.addEventListener('htmx:confirm', function (event) {
    var cause = event.detail.triggeringEvent;
    var shown = document.querySelector('#memory-view [name=q]');
    if (event.detail.elt.id === 'memory-search' && cause && cause.type === 'input' && shown
        && shown.value === document.getElementById('memory-q').value) event.preventDefault();
  });

  // A search fired by a pause in typing replaces the history entry (app/pages.py `canonical`).
  document.addEventListener('htmx:configRequest', function (event) {
    var cause = event.detail.triggeringEvent;
    if (event.detail.elt.id === 'memory-search' && cause && cause.type === 'input') {
      event.detail.headers['X-Search-Typing'] = 'true';
    }
  });
  document.addEventListener('click', function (event) {
    if (!event.target.closest('[data-discard]')) return;
    document.getElementById('discard-dialog').close();
    if (pendingRequest) pendingRequest(true);
    pendingRequest = null;
  });
  document.addEventListener('close', function (event) {
    if (event.target.id !== 'discard-dialog' || pendingRequest === null) return;
    // 继续编辑: back to the text being edited.
    pendingRequest = null;
    if (pendingFrom && pendingFrom.closest('.toolbar')) matchTheList();
    pendingFrom = null;
    var edits = unsavedEdits();
    if (edits.length) edits[0].focus();
  }, true);
  // Set when the login expired and what was typed is kept as a draft: leaving is then safe.
  var draftsKept = false;
  window.addEventListener('beforeunload', function (event) {
    if (!draftsKept && unsavedEdits().length) event.preventDefault();
  });

  // ---- an expired login loses no typed text ----
  // A 401 answers with HX-Redirect to the login page, which brings the person back here. What
  // the edits and the add dialog hold goes into this tab's sessionStorage first, and comes back
  // into the same forms when the page loads again.

  var DRAFTS = 'memory-drafts';

  function keepDrafts(why) {
    var drafts = {edits: {}, added: null, why: why};
    document.querySelectorAll('form[data-inline-edit]').forEach(function (form) {
      var area = form.querySelector('textarea');
      var row = form.closest('li[id^="memory-"]');
      // With the version the edit started from: saved after the login, it is still checked
      // against changes made meanwhile (a conflict then shows both, never an overwrite).
      if (area && row && unsaved(area)) {
        drafts.edits[row.id] = {text: area.value, headers: form.getAttribute('hx-headers')};
      }
    });
    var dialog = document.getElementById('memory-dialog');
    var content = document.getElementById('memory-content');
    if (dialog && dialog.open && content && content.value.trim()) {
      var project = dialog.querySelector('[name=projectKey]');
      drafts.added = {scope: document.getElementById('memory-scope').value, content: content.value,
                      projectKey: project ? project.value : ''};
    }
    if (Object.keys(drafts.edits).length || drafts.added) {
      try { sessionStorage.setItem(DRAFTS, JSON.stringify(drafts)); } catch (e) { return; }
      draftsKept = true;
    }
  }

  document.addEventListener('htmx:beforeOnLoad', function (event) {
    if (event.detail.xhr.status === 401) keepDrafts('expired');
  });

  // Leaving by a link to a page of this site (the menu, 我的记忆 itself) keeps the typed text as
  // a draft too, instead of the browser asking: with an expired login its "leave site?" came
  // before the login page's promise that nothing is lost, and answering it lost the text.
  document.addEventListener('click', function (event) {
    var link = event.target.closest && event.target.closest('a[href]');
    if (!link || event.defaultPrevented || event.button !== 0 || event.ctrlKey || event.metaKey
        || event.shiftKey || event.altKey || link.target || link.hasAttribute('hx-get')
        || link.getAttribute('href').charAt(0) === '#' || link.origin !== location.origin) return;
    if (unsavedEdits().length) keepDrafts('left');
  });

  function notice(text) {
    var region = document.getElementById('toast');
    if (!region) return;
    var message = document.createElement('div');
    message.className = 'toast-message notice';
    message.setAttribute('role', 'status');
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

  function restoreEdit(rowId, draft) {
    var row = document.getElementById(rowId);
    var edit = row && row.querySelector('[hx-get$="/edit"]');
    if (!edit) return false;
    htmx.ajax('GET', edit.getAttribute('hx-get'), {source: edit, target: row, swap: 'outerHTML'})
      .then(function () {
        var area = document.querySelector('#' + rowId + ' textarea');
        if (!area) return;
        area.value = draft.text;
        if (draft.headers) area.form.setAttribute('hx-headers', draft.headers);
        refresh(area.form);
        area.focus();
      });
    return true;
  }

  function restoreDrafts() {
    var raw = null;
    try { raw = sessionStorage.getItem(DRAFTS); sessionStorage.removeItem(DRAFTS); } catch (e) { return; }
    if (!raw) return;
    var drafts = JSON.parse(raw);
    var lost = [];
    Object.keys(drafts.edits || {}).forEach(function (rowId) {
      if (!restoreEdit(rowId, drafts.edits[rowId])) lost.push(drafts.edits[rowId].text);
    });
    if (drafts.added) {
      var dialog = document.getElementById('memory-dialog');
      openAddDialog(dialog);
      document.getElementById('memory-content').value = drafts.added.content;
      var scope = document.getElementById('memory-scope');
      if (drafts.added.scope !== scope.value) {
        scope.value = drafts.added.scope;
        htmx.trigger(scope, 'change');
      }
      refresh(dialog.querySelector('form'));
    }
    var when = drafts.why === 'left' ? '离开本页前' : '登录过期前';
    notice(lost.length
      ? when + '没保存的内容(所在的记忆已不在本页):' + lost.join(' / ')
      : '已恢复' + when + '没保存的内容,请确认后保存。');
  }

  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', restoreDrafts);
  } else {
    restoreDrafts();
  }
})();
