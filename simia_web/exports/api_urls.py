from rest_framework.routers import SimpleRouter

from . import api

router = SimpleRouter()
router.register("snapshots", api.SnapshotViewSet, basename="api-snapshot")

urlpatterns = router.urls
