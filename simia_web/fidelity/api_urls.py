from rest_framework.routers import SimpleRouter

from . import api

router = SimpleRouter()
router.register("fidelity/runs", api.FidelityRunViewSet, basename="api-fidelity-run")

urlpatterns = router.urls
