from rest_framework.routers import SimpleRouter

from . import api

router = SimpleRouter()
router.register("ratings", api.RatingViewSet, basename="api-rating")
router.register("rating-assignments", api.AssignmentViewSet, basename="api-rating-assignment")
router.register("calibration/runs", api.CalibrationRunViewSet, basename="api-calibration-run")

urlpatterns = router.urls
