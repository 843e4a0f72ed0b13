from rest_framework.routers import SimpleRouter

from . import api

router = SimpleRouter()
router.register("trajectories", api.TrajectoryViewSet, basename="api-trajectory")

urlpatterns = router.urls
