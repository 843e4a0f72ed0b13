from rest_framework.routers import SimpleRouter

from . import api

router = SimpleRouter()
router.register("audits", api.AuditViewSet, basename="api-audit")

urlpatterns = router.urls
