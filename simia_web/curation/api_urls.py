from django.urls import path
from rest_framework.routers import SimpleRouter

from . import api

router = SimpleRouter()
router.register("trajectories", api.TrajectoryViewSet, basename="api-trajectory")
router.register("gold", api.GoldItemViewSet, basename="api-gold")

urlpatterns = [
    path("annotators/<str:pk>/quality/", api.AnnotatorQualityView.as_view(), name="api-annotator-quality"),
    *router.urls,
]
