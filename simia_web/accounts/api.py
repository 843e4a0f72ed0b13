"""API-wide pieces: the error answers every endpoint documents, and `me` (check a token and its role)."""

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers
from rest_framework.generics import RetrieveAPIView

from .models import User


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()


ERROR_RESPONSES = {
    "400": (OpenApiTypes.OBJECT, "Invalid parameters or body: {field: [messages]}."),
    "401": (ErrorSerializer, "No credentials, or a bad token."),
    "403": (ErrorSerializer, "Your role does not allow this."),
    "404": (ErrorSerializer, "No such object (or an invalid pagination cursor)."),
}


class ApiAutoSchema(AutoSchema):
    """Documents the error answers every endpoint can give, so clients (and schema checks) expect them.

    Set as `schema = ApiAutoSchema()` on each API view (one instance per view class)."""

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        for code, (body, description) in ERROR_RESPONSES.items():
            if code not in responses:
                responses[code] = self._get_response_for_code(OpenApiResponse(body, description), code)
        return responses


class MeSerializer(serializers.ModelSerializer):
    class Meta:
        model = User
        fields = ["id", "username", "email", "role"]


class MeApi(RetrieveAPIView):
    serializer_class = MeSerializer
    pagination_class = None
    filter_backends = []
    schema = ApiAutoSchema()

    def get_object(self):
        return self.request.user
