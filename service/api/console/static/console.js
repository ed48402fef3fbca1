// Marginalia console: the only script of the console. It follows a running job (polling its progress and
// reloading the page once the job ends) and copies SQL to the clipboard. Every page works without it.
"use strict";

function followJob(box) {
  const url = box.dataset.progress;
  const bar = document.getElementById("job-bar");
  const state = document.getElementById("job-state");
  const message = document.getElementById("job-message");
  async function poll() {
    try {
      const answer = await fetch(url, {credentials: "same-origin", headers: {"Accept": "application/json"}});
      if (!answer.ok) { return; }
      const job = await answer.json();
      state.textContent = job.state;
      message.textContent = job.progress.message;
      bar.max = Math.max(job.progress.total, 1);
      bar.value = job.progress.done;
      if (job.state !== "running") { window.location.reload(); return; }
    } catch (error) { /* a dropped connection: try again */ }
    window.setTimeout(poll, 700);
  }
  window.setTimeout(poll, 300);
}

document.addEventListener("DOMContentLoaded", () => {
  const job = document.getElementById("job");
  if (job && job.dataset.state === "running") { followJob(job); }
  for (const button of document.querySelectorAll("button.copy")) {
    button.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(button.dataset.copy);
        button.textContent = "Copied";
      } catch (error) {
        button.textContent = "Select the SQL above and copy it";
      }
    });
  }
});
