// The interactive API page (/api/docs): Swagger UI on this service's own OpenAPI document.
// A file of its own, not an inline script: the pages' Content-Security-Policy runs only the
// service's script files.
window.addEventListener("DOMContentLoaded", () => {
  const root = document.getElementById("swagger-ui");
  window.ui = window.SwaggerUIBundle({
    url: root.dataset.specUrl,
    dom_id: "#swagger-ui",
    presets: [window.SwaggerUIBundle.presets.apis, window.SwaggerUIStandalonePreset],
    layout: "StandaloneLayout",
  });
});
