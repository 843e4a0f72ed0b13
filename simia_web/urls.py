"""The site's routes: the auth views, the API schema and docs, then each app's pages and REST endpoints."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from simia_web.accounts.permissions import IsMember
from simia_web.accounts.views import LoginView
from simia_web.core.views import favicon

# Each app owns its pages (urls.py) and its REST endpoints (api_urls.py).
APPS = [
    "accounts",
    "catalog",
    "jobs",
    "curation",
    "exports",
    "environments",
    "llm",
    "operations",
    "fidelity",
    "calibration",
    "audits",
    "auditlog",
]

urlpatterns = [
    path("favicon.ico", favicon, name="favicon"),
    path("admin/", admin.site.urls),
    path("accounts/login/", LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/schema/", SpectacularAPIView.as_view(permission_classes=[IsMember]), name="api-schema"),
    path(
        "api/docs/",
        # The split view serves its start-up script as a file (`?script`), which the CSP allows.
        SpectacularSwaggerSplitView.as_view(
            url_name="api-schema", template_name="api/swagger_ui.html", permission_classes=[IsMember]
        ),
        name="api-docs",
    ),
]
for app in APPS:
    urlpatterns += [
        path("", include(f"simia_web.{app}.urls")),
        path("api/v1/", include(f"simia_web.{app}.api_urls")),
    ]
