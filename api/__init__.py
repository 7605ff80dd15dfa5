"""The HTTP API: `api.app.create_app(service, settings)` over `api.service.ControllerService`."""
