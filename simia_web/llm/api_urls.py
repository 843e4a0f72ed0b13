from rest_framework.routers import SimpleRouter

from . import api

router = SimpleRouter()
router.register("llm/profiles", api.EndpointProfileViewSet, basename="api-llm-profile")

urlpatterns = router.urls
