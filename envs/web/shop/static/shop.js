// Loads the shop's next page in place: a form submit or agentgymLoad(url) fetches the page
// and swaps the body, and window.agentgymPending resolves once it is shown (the browser env
// waits on it). Without this script the forms post as usual.
(() => {
  'use strict';
  const show = async (response) => {
    const html = await response.text();
    const doc = new DOMParser().parseFromString(html, 'text/html');
    document.title = doc.title;
    document.body.replaceWith(document.adoptNode(doc.body));
    const url = response.headers.get('X-Page-URL');
    if (url) history.replaceState(null, '', url);
    window.scrollTo(0, 0);
  };
  const go = (url, init) =>
    fetch(url, Object.assign({credentials: 'same-origin', cache: 'no-store'}, init)).then(show);
  document.addEventListener('submit', (event) => {
    event.preventDefault();
    const form = event.target;
    const data = event.submitter ? new FormData(form, event.submitter) : new FormData(form);
    const body = new URLSearchParams(data);
    window.agentgymPending = go(form.action, {method: 'POST', body});
  });
  window.agentgymLoad = (url) => {
    window.agentgymPending = go(url);
    return window.agentgymPending;
  };
})();
