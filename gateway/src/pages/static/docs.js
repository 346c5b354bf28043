// Renders this gateway's OpenAPI document (served at /v1/openapi.json) with Swagger UI.
window.ui = SwaggerUIBundle({
  url: "/v1/openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  // The default sends the document's URL to a validator on the internet for a badge.
  validatorUrl: null,
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout",
});
