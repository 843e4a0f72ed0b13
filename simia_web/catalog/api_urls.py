from django.urls import path
from rest_framework.routers import SimpleRouter

from . import api, api_guidelines, api_imports

router = SimpleRouter()
router.register("domains", api.DomainViewSet, basename="api-domain")
router.register("apis", api.ApiViewSet, basename="api-api")
router.register("tasks", api.TaskViewSet, basename="api-task")
router.register("seeds", api.SeedViewSet, basename="api-seed")

urlpatterns = [
    path("apis/import/", api_imports.ApiImportView.as_view(), name="api-apis-import"),
    path("domains/<str:name>/guidelines/", api_guidelines.DomainGuidelinesView.as_view(), name="api-domain-guidelines"),
    path("domains/<str:name>/reference/", api_imports.DomainReferenceView.as_view(), name="api-domain-reference"),
    *router.urls,
]
