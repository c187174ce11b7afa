// The console's conveniences. Every action works without this script (plain HTML forms);
// it adds confirmations, the copy button, select-all boxes and an order's live status.
"use strict";

document.addEventListener("submit", (event) => {
  const form = event.target;
  const question = form instanceof HTMLFormElement ? form.dataset.confirm : undefined;
  if (question && !window.confirm(question)) {
    event.preventDefault();
  }
});

document.addEventListener("click", async (event) => {
  const button = event.target instanceof Element ? event.target.closest("[data-copy]") : null;
  if (!button) return;
  const field = document.getElementById(button.dataset.copy);
  if (!field) return;
  field.select();
  try {
    await navigator.clipboard.writeText(field.value);
  } catch {
    document.execCommand("copy"); // an older browser, or no clipboard permission
  }
  button.textContent = "Copied";
});

// A select-all box ([data-select-all="id"]) checks or clears its form's boxes named "id".
document.addEventListener("change", (event) => {
  const box = event.target;
  if (!(box instanceof HTMLInputElement) || !box.dataset.selectAll || !box.form) return;
  for (const element of box.form.elements) {
    if (element instanceof HTMLInputElement && element.name === box.dataset.selectAll) {
      element.checked = box.checked;
    }
  }
});

// An order's status, refreshed every few seconds while the page is open.
const POLL_MS = 5000;
for (const element of document.querySelectorAll("[data-poll]")) {
  const poll = async () => {
    try {
      const response = await fetch(element.dataset.poll, {
        headers: { Accept: "application/json" },
        credentials: "same-origin",
        redirect: "error",
      });
      if (!response.ok) return; // the session ended: the next navigation signs in again
      const { status } = await response.json();
      if (status && status !== element.textContent) {
        element.textContent = status;
        element.className = `status status-${status}`;
        for (const form of document.querySelectorAll(".actions form")) {
          form.hidden = status !== "pending";
        }
      }
    } catch {
      return;
    }
    window.setTimeout(poll, POLL_MS);
  };
  window.setTimeout(poll, POLL_MS);
}
