// gatehouse: starts the viewer on this gateway's OpenAPI document, passing
// on the ?token= the page was opened with and authorizing "Try it out"
// with it (Authorization: Bearer). Ours, not vendored: a file so that the
// page needs no inline script under its Content-Security-Policy.
const token = new URLSearchParams(location.search).get('token');
window.ui = SwaggerUIBundle({
  url: '/docs/openapi.json' + (token ? '?token=' + encodeURIComponent(token) : ''),
  dom_id: '#swagger-ui',
  docExpansion: 'list',
  deepLinking: true,
  onComplete: () => {
    if (token) window.ui.preauthorizeApiKey('bearerAuth', token);
  },
});
