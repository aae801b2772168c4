// majordomus: Swagger UI over this server's own OpenAPI document; every asset is served from the package.
window.ui = SwaggerUIBundle({ url: "/openapi.json", dom_id: "#swagger-ui", deepLinking: true });
