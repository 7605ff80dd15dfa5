"""The HTTP front end: `api.http.app.create_app(service, settings)` over `api.service.ControllerService`.

app.py (the FastAPI application), routes/ (one router per area; routes/common.py's Gateway is the one path
of every envelope operation), models.py (pydantic request and answer models), errors.py (JSON errors,
exception handlers, the body limit), auth.py (the admin bearer token). It calls only `api.service`.
"""
