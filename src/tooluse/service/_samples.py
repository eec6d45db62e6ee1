"""Sample live-data tools for ``tooluse serve`` on a fresh machine.

SAMPLE DATA: these tools are deterministic offline fakes (the clock is real), so the service
has something to call before you give it your own tools (``tooluse serve --tools
module:attribute``). Every result says ``"sample": true``. ``cancel_order`` needs a human's
approval, to show the approval flow; it cancels nothing. The read-only ones are computations of
microseconds, so they run ``inline`` (on the event loop: a hand-off to the tool threads would
cost more than they do); a tool of yours that does I/O must not.
"""

from __future__ import annotations

import datetime
import hashlib
import zoneinfo
from typing import Annotated, Literal

from tooluse.tools import ToolParam, tool

__all__ = [
    "SAMPLE_TOOLS",
    "cancel_order",
    "find_pickup_locations",
    "get_current_time",
    "get_order_status",
    "get_weather",
]

_SKIES = ("sunny", "partly cloudy", "overcast", "light rain", "windy")
_ORDER_STATES = ("processing", "shipped", "out for delivery", "delivered")
_CARRIERS = ("SF Express", "DHL", "UPS")


def _stable_number(text: str, modulo: int) -> int:
    """A number that depends only on ``text`` (Python's ``hash`` changes per process)."""
    digest = hashlib.sha256(text.strip().lower().encode()).digest()
    return int.from_bytes(digest[:4], "big") % modulo


@tool(read_only=True, inline=True)
def get_weather(
    city: Annotated[str, ToolParam(description="City name, e.g. Paris or 北京")],
    unit: Literal["celsius", "fahrenheit"] = "celsius",
) -> dict[str, object]:
    """Current weather in a city: temperature and sky (sample tool, made-up data; 天气、气温)."""
    celsius = _stable_number(city, 36) - 5
    temperature = celsius if unit == "celsius" else round(celsius * 9 / 5 + 32)
    return {
        "city": city,
        "temperature": temperature,
        "unit": unit,
        "sky": _SKIES[_stable_number("sky" + city, len(_SKIES))],
        "sample": True,
    }


@tool(read_only=True, inline=True)
def get_current_time(
    timezone: Annotated[
        str, ToolParam(description="IANA time zone, e.g. Europe/Paris or Asia/Shanghai")
    ] = "UTC",
) -> dict[str, object]:
    """The current date and time in a time zone (sample tool; 当前时间、日期、几点)."""
    try:
        zone = zoneinfo.ZoneInfo(timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(
            f"Unknown time zone {timezone!r}: use an IANA name such as 'Europe/Paris'"
        ) from exc
    now = datetime.datetime.now(zone)
    return {"timezone": timezone, "datetime": now.isoformat(timespec="seconds"), "sample": True}


@tool(read_only=True, inline=True)
def get_order_status(
    order_id: Annotated[str, ToolParam(description="Order number, e.g. A1001")],
) -> dict[str, object]:
    """Live status of an order: where it is now, its state, carrier and days to delivery
    (sample tool with made-up data; 订单、物流、快递、在哪)."""
    if not order_id.strip():
        raise ValueError("order_id is empty: ask the user for the order number")
    state = _ORDER_STATES[_stable_number(order_id, len(_ORDER_STATES))]
    return {
        "order_id": order_id,
        "status": state,
        "carrier": _CARRIERS[_stable_number("carrier" + order_id, len(_CARRIERS))],
        "days_to_delivery": 0 if state == "delivered" else 1 + _stable_number(order_id, 4),
        "sample": True,
    }


_POINT_KINDS = ("parcel locker", "pickup station", "convenience store counter")


@tool(read_only=True, inline=True)
def find_pickup_locations(
    near: Annotated[
        str, ToolParam(description="A place, address or landmark, e.g. People's Square or 外滩")
    ],
    radius_km: Annotated[float, ToolParam(description="Search radius in km, up to 20")] = 2.0,
) -> dict[str, object]:
    """Parcel pickup points (lockers, stations) near a place, nearest first (sample tool with
    made-up data; 自提点、快递柜、附近有哪些)."""
    if not near.strip():
        raise ValueError("near is empty: ask the user where to search")
    if not 0 < radius_km <= 20:
        raise ValueError(f"radius_km must be above 0 and at most 20, got {radius_km}")
    count = 1 + _stable_number("count" + near, 4)
    points = [
        {
            "name": f"{near} {_POINT_KINDS[_stable_number(f'{n}{near}', 3)]} #{n}",
            # inside the radius, nearest first
            "distance_km": round(
                radius_km * (n - 1 + (1 + _stable_number(f"d{n}{near}", 9)) / 10) / count, 1
            ),
        }
        for n in range(1, count + 1)
    ]
    return {"near": near, "radius_km": radius_km, "pickup_points": points, "sample": True}


@tool(requires_approval=True, destructive=True, idempotency_key=True)
def cancel_order(
    order_id: Annotated[str, ToolParam(description="Order number, e.g. A1001")],
    reason: Annotated[str | None, ToolParam(description="Why the customer cancels")] = None,
) -> dict[str, object]:
    """Cancel an order; a human must approve each call (sample tool: nothing is really
    cancelled; 取消订单)."""
    return {"order_id": order_id, "cancelled": True, "reason": reason, "sample": True}


SAMPLE_TOOLS = (
    get_weather,
    get_current_time,
    get_order_status,
    cancel_order,
    find_pickup_locations,
)
"""The sample tools ``tooluse serve`` offers when it is given no tools of its own."""
