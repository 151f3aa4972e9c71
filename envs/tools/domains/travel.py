"""The travel domain: flight and hotel search, bookings for saved travellers, payments with
refunds on cancellation. Every date lies in March 2027, so the backend is deterministic."""

from __future__ import annotations

import copy
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any, ClassVar

from agentgym.envs.tools.backend import TASK_TYPES, Call, Domain, Task, Tool, ToolFailure, not_found

FIRST_DAY = date(2027, 3, 1)
LAST_DAY = date(2027, 3, 31)
MAX_NIGHTS = 14

AIRPORTS = {
    "ATL": "Atlanta",
    "BOS": "Boston",
    "CDG": "Paris",
    "DEN": "Denver",
    "JFK": "New York",
    "LAX": "Los Angeles",
    "LHR": "London",
    "MIA": "Miami",
    "ORD": "Chicago",
    "SEA": "Seattle",
}
CITIES = sorted(AIRPORTS.values())
CABINS = ("economy", "premium_economy", "business")
PAYMENT_METHODS = ("visa", "mastercard", "amex", "paypal")
BOOKING_STATUSES = ("pending_payment", "paid", "cancelled")
AIRLINES = (("AU", "Aurora Air"), ("BJ", "Bluejay Airlines"), ("CB", "Cobalt Airways"))
HOTEL_WORDS = ("Grand", "Harbor", "Garden", "Central", "Riverside", "Summit", "Royal", "Park")
HOTEL_KINDS = ("Hotel", "Inn", "Suites", "Lodge")
AMENITIES = ("breakfast", "gym", "parking", "pool", "spa", "wifi")
FIRST_NAMES = ("Maya", "Liam", "Sofia", "Noah", "Amara", "Lucas", "Iris", "Mateo", "Hana")
LAST_NAMES = ("Chen", "Okafor", "Rossi", "Larsen", "Patel", "Moreau", "Silva", "Novak", "Kim")
TIERS = ("none", "silver", "gold")

_CABIN_WORDS = {"economy": "economy", "premium_economy": "premium economy", "business": "business"}
_DATE_RE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")


def _string(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **extra}


def _number(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "number", "description": description, **extra}


def _integer(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "integer", "description": description, **extra}


def _object(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    """A strict object schema; every property is required unless ``required`` says otherwise."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
        "additionalProperties": False,
    }


def _array(items: dict[str, Any], description: str) -> dict[str, Any]:
    return {"type": "array", "items": items, "description": description}


_FLIGHT_ID = _string("Flight id, e.g. 'f12'.", pattern="^f[0-9]+$")
_HOTEL_ID = _string("Hotel id, e.g. 'h7'.", pattern="^h[0-9]+$")
_TRAVELLER_ID = _string("Saved traveller id, e.g. 't3'.", pattern="^t[0-9]+$")
_BOOKING_ID = _string("Booking id, e.g. 'b14'.", pattern="^b[0-9]+$")
_PAYMENT_ID = _string("Payment id, e.g. 'pay5'.", pattern="^pay[0-9]+$")
_AIRPORT = _string("IATA airport code, e.g. 'JFK'.", pattern="^[A-Z]{3}$")
_CABIN = _string("Cabin class.", enum=list(CABINS))
_DATE = _string("Date as YYYY-MM-DD (March 2027).", format="date")
_METHOD = _string("Payment method.", enum=list(PAYMENT_METHODS))
_STATUS = _string("Booking status.", enum=list(BOOKING_STATUSES))
_PRICE = _number("Price in USD.", minimum=0)
_SEATS = _integer("Seats still available.", minimum=0)
_ROOMS_LEFT = _integer("Rooms still available.", minimum=0)
_TIME = _string("Local time as HH:MM.", pattern="^[0-9]{2}:[0-9]{2}$")

_FLIGHT_VIEW = _object(
    {
        "flight_id": _FLIGHT_ID,
        "airline": _string("Airline name."),
        "flight_number": _string("Flight number, e.g. 'AU412'."),
        "origin": _AIRPORT,
        "origin_city": _string("City of the origin airport."),
        "destination": _AIRPORT,
        "destination_city": _string("City of the destination airport."),
        "date": _DATE,
        "depart": _TIME,
        "arrive": _TIME,
        "duration_min": _integer("Flight time in minutes.", minimum=1),
        "cabins": {
            "type": "object",
            "description": "Price and seats left per cabin class.",
            "properties": {c: _object({"price": _PRICE, "seats_left": _SEATS}) for c in CABINS},
            "required": list(CABINS),
            "additionalProperties": False,
        },
    }
)
_FLIGHT_HIT = _object(
    {
        "flight_id": _FLIGHT_ID,
        "airline": _string("Airline name."),
        "flight_number": _string("Flight number."),
        "depart": _TIME,
        "arrive": _TIME,
        "duration_min": _integer("Flight time in minutes.", minimum=1),
        "cabin": _CABIN,
        "price": _PRICE,
        "seats_left": _SEATS,
    }
)
_HOTEL_VIEW = _object(
    {
        "hotel_id": _HOTEL_ID,
        "name": _string("Hotel name."),
        "city": _string("City.", enum=CITIES),
        "stars": _integer("Star rating.", minimum=1, maximum=5),
        "price_per_night": _PRICE,
        "rooms_available": _ROOMS_LEFT,
        "amenities": _array(_string("Amenity.", enum=list(AMENITIES)), "Amenities, sorted."),
    }
)
_HOTEL_HIT = _object(
    {
        "hotel_id": _HOTEL_ID,
        "name": _string("Hotel name."),
        "stars": _integer("Star rating.", minimum=1, maximum=5),
        "price_per_night": _PRICE,
        "total_price": _number("Price of one room for the whole stay.", minimum=0),
        "rooms_available": _ROOMS_LEFT,
    }
)
_BOOKING_VIEW = _object(
    {
        "booking_id": _BOOKING_ID,
        "kind": _string("What is booked.", enum=["flight", "hotel"]),
        "traveller_id": _TRAVELLER_ID,
        "status": _STATUS,
        "total": _PRICE,
        "payment_id": {"type": ["string", "null"], "description": "Payment id once paid."},
        "flight_id": _FLIGHT_ID,
        "cabin": _CABIN,
        "origin": _AIRPORT,
        "destination": _AIRPORT,
        "date": _DATE,
        "hotel_id": _HOTEL_ID,
        "city": _string("Hotel city.", enum=CITIES),
        "check_in": _DATE,
        "check_out": _DATE,
        "nights": _integer("Nights of the stay.", minimum=1),
        "rooms": _integer("Rooms booked.", minimum=1),
    },
    required=["booking_id", "kind", "traveller_id", "status", "total", "payment_id"],
)
_PAYMENT_VIEW = _object(
    {
        "payment_id": _PAYMENT_ID,
        "booking_id": _BOOKING_ID,
        "method": _METHOD,
        "amount": _PRICE,
        "status": _string("Payment status.", enum=["captured", "refunded"]),
    }
)
_TRAVELLER_VIEW = _object(
    {
        "traveller_id": _TRAVELLER_ID,
        "name": _string("Full name."),
        "email": _string("Email address.", format="email"),
        "home_airport": _AIRPORT,
        "loyalty_tier": _string("Loyalty tier.", enum=list(TIERS)),
    }
)

TOOLS = (
    Tool(
        "search_flights",
        "Search flights on one route and date; lists each flight with the price and seats left "
        "in the chosen cabin.",
        _object(
            {
                "origin": _string("Departure airport code, e.g. 'JFK'.", pattern="^[A-Z]{3}$"),
                "destination": _string("Arrival airport code, e.g. 'LHR'.", pattern="^[A-Z]{3}$"),
                "date": _string("Departure date as YYYY-MM-DD.", format="date"),
                "cabin": _CABIN,
                "sort_by": _string(
                    "Order of the results (default: departure).", enum=["departure", "price"]
                ),
            },
            required=["origin", "destination", "date", "cabin"],
        ),
        _object(
            {
                "flights": _array(_FLIGHT_HIT, "Matching flights."),
                "count": _integer("Number of flights.", minimum=0),
            }
        ),
        latency_ms=180.0,
    ),
    Tool(
        "get_flight",
        "Get one flight's schedule, route, and prices and seats left in every cabin.",
        _object({"flight_id": _FLIGHT_ID}),
        _FLIGHT_VIEW,
        latency_ms=70.0,
    ),
    Tool(
        "search_hotels",
        "Search hotels in a city for a stay (check-in to check-out), cheapest first.",
        _object(
            {
                "city": _string("City to stay in.", enum=CITIES),
                "check_in": _string("Check-in date as YYYY-MM-DD.", format="date"),
                "check_out": _string("Check-out date as YYYY-MM-DD.", format="date"),
                "max_price": _number("Highest price per night in USD.", minimum=1, maximum=5000),
                "min_stars": _integer("Lowest star rating.", minimum=1, maximum=5),
            },
            required=["city", "check_in", "check_out"],
        ),
        _object(
            {
                "hotels": _array(_HOTEL_HIT, "Matching hotels, cheapest first."),
                "nights": _integer("Nights of the stay.", minimum=1),
                "count": _integer("Number of hotels.", minimum=0),
            }
        ),
        latency_ms=160.0,
    ),
    Tool(
        "get_hotel",
        "Get one hotel's details: city, stars, nightly price, rooms available, amenities.",
        _object({"hotel_id": _HOTEL_ID}),
        _HOTEL_VIEW,
        latency_ms=60.0,
    ),
    Tool(
        "book_flight",
        "Book one seat on a flight for a saved traveller; the booking awaits payment.",
        _object({"flight_id": _FLIGHT_ID, "traveller_id": _TRAVELLER_ID, "cabin": _CABIN}),
        _object(
            {
                "booking_id": _BOOKING_ID,
                "status": _STATUS,
                "flight_id": _FLIGHT_ID,
                "cabin": _CABIN,
                "total": _PRICE,
                "seats_left": _SEATS,
            }
        ),
        writes=True,
        latency_ms=320.0,
    ),
    Tool(
        "book_hotel",
        "Book hotel rooms for a saved traveller's stay; the booking awaits payment.",
        _object(
            {
                "hotel_id": _HOTEL_ID,
                "traveller_id": _TRAVELLER_ID,
                "check_in": _string("Check-in date as YYYY-MM-DD.", format="date"),
                "check_out": _string("Check-out date as YYYY-MM-DD.", format="date"),
                "rooms": _integer("Number of rooms.", minimum=1, maximum=4),
            }
        ),
        _object(
            {
                "booking_id": _BOOKING_ID,
                "status": _STATUS,
                "hotel_id": _HOTEL_ID,
                "nights": _integer("Nights of the stay.", minimum=1),
                "rooms": _integer("Rooms booked.", minimum=1),
                "total": _PRICE,
                "rooms_left": _ROOMS_LEFT,
            }
        ),
        writes=True,
        latency_ms=300.0,
    ),
    Tool(
        "list_bookings",
        "List a saved traveller's bookings, optionally only those with one status.",
        _object(
            {"traveller_id": _TRAVELLER_ID, "status": _STATUS},
            required=["traveller_id"],
        ),
        _object(
            {
                "traveller_id": _TRAVELLER_ID,
                "bookings": _array(_BOOKING_VIEW, "Bookings, oldest first."),
                "count": _integer("Number of bookings.", minimum=0),
            }
        ),
        latency_ms=120.0,
    ),
    Tool(
        "get_booking",
        "Get one booking: what is booked, for whom, total, status and payment.",
        _object({"booking_id": _BOOKING_ID}),
        _BOOKING_VIEW,
        latency_ms=60.0,
    ),
    Tool(
        "cancel_booking",
        "Cancel a booking, releasing its seat or rooms; a paid booking is refunded in full.",
        _object({"booking_id": _BOOKING_ID}),
        _object(
            {
                "booking_id": _BOOKING_ID,
                "status": _STATUS,
                "refund_amount": _PRICE,
                "refunded_payment_id": {
                    "type": ["string", "null"],
                    "description": "The refunded payment, if the booking was paid.",
                },
            }
        ),
        writes=True,
        latency_ms=280.0,
    ),
    Tool(
        "pay_booking",
        "Pay a booking's total with a payment method; returns the new payment id.",
        _object({"booking_id": _BOOKING_ID, "payment_method": _METHOD}),
        _object(
            {
                "payment_id": _PAYMENT_ID,
                "booking_id": _BOOKING_ID,
                "amount": _PRICE,
                "method": _METHOD,
                "status": _STATUS,
            }
        ),
        writes=True,
        latency_ms=350.0,
    ),
    Tool(
        "get_payment",
        "Get one payment: its booking, method, amount and whether it was refunded.",
        _object({"payment_id": _PAYMENT_ID}),
        _PAYMENT_VIEW,
        latency_ms=60.0,
    ),
    Tool(
        "list_travellers",
        "List the travellers saved on the account, with ids, names and home airports.",
        _object({}),
        _object(
            {
                "travellers": _array(_TRAVELLER_VIEW, "Saved travellers."),
                "count": _integer("Number of travellers.", minimum=0),
            }
        ),
        latency_ms=80.0,
    ),
)


def _num(key: str) -> int:
    """The number in an id ("f12" -> 12), for numeric ordering whatever the dict order."""
    return int(key.lstrip("abcdefghijklmnopqrstuvwxyz"))


def _money(x: float) -> float:
    return round(x, 2)


def _fact(value: Any) -> str:
    """A value as ``json.dumps`` shows it inside a result."""
    return value if isinstance(value, str) else json.dumps(value)


def _day(text: str) -> date:
    if not _DATE_RE.match(text):
        raise ToolFailure("failed_precondition", f"{text!r} is not a date; use YYYY-MM-DD")
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise ToolFailure(
            "failed_precondition", f"{text!r} is not a calendar date; use YYYY-MM-DD"
        ) from None


def _nights(check_in: str, check_out: str) -> int:
    """Nights of a stay; raises unless it lies in the bookable window."""
    start, end = _day(check_in), _day(check_out)
    if start < FIRST_DAY or end > LAST_DAY:
        raise ToolFailure(
            "failed_precondition",
            f"stays must lie between {FIRST_DAY} and {LAST_DAY}; choose dates in that window",
        )
    nights = (end - start).days
    if nights < 1:
        raise ToolFailure(
            "failed_precondition", "check_out must be after check_in; pick a later check-out"
        )
    if nights > MAX_NIGHTS:
        raise ToolFailure(
            "failed_precondition", f"a stay can last at most {MAX_NIGHTS} nights; split it"
        )
    return nights


def _get(state: dict[str, Any], collection: str, kind: str, key: str) -> dict[str, Any]:
    item = state[collection].get(key)
    if item is None:
        raise not_found(kind, key)
    return item


def _overlaps(a: str, b: str) -> bool:
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def calls_conflict(first: tuple[list[str], list[str]], second: tuple[list[str], list[str]]) -> bool:
    """Whether two calls' (read, written) resources conflict: one writes a path equal to,
    above or below a path the other reads or writes."""
    (r1, w1), (r2, w2) = first, second
    return any(_overlaps(w, p) for w in w1 for p in r2 + w2) or any(
        _overlaps(w, p) for w in w2 for p in r1 + w1
    )


class TravelDomain(Domain):
    """Flights, hotels, bookings, payments and saved travellers over March 2027."""

    name: ClassVar[str] = "travel"
    description: ClassVar[str] = (
        "Travel booking: search flights and hotels, book them for saved travellers, pay, "
        "cancel and get refunds."
    )

    def __init__(self) -> None:
        self._handlers: dict[str, Callable[[dict[str, Any], dict[str, Any]], Any]] = {
            "search_flights": self._search_flights,
            "get_flight": self._get_flight,
            "search_hotels": self._search_hotels,
            "get_hotel": self._get_hotel,
            "book_flight": self._book_flight,
            "book_hotel": self._book_hotel,
            "list_bookings": self._list_bookings,
            "get_booking": self._get_booking,
            "cancel_booking": self._cancel_booking,
            "pay_booking": self._pay_booking,
            "get_payment": self._get_payment,
            "list_travellers": self._list_travellers,
        }

    def tools(self) -> list[Tool]:
        """The twelve travel tools, in a fixed order."""
        return list(TOOLS)

    # ---- state ---------------------------------------------------------------------------

    def build(self, seed: int) -> dict[str, Any]:
        """Ten airports, about 40 flights, 25 hotels, 8 travellers and 18 earlier bookings
        (some paid, some cancelled), all drawn from ``random.Random(seed)``."""
        rng = random.Random(seed)
        state: dict[str, Any] = {
            "airports": {code: {"code": code, "city": city} for code, city in AIRPORTS.items()},
            "flights": {},
            "hotels": {},
            "travellers": {},
            "bookings": {},
            "payments": {},
            "next_booking": 1,
            "next_payment": 1,
        }
        codes = sorted(AIRPORTS)
        routes: list[tuple[str, str]] = []
        while len(routes) < 14:
            origin, destination = rng.sample(codes, 2)
            if (origin, destination) not in routes:
                routes.append((origin, destination))
        numbers: set[str] = set()
        for origin, destination in routes:
            duration = rng.randrange(60, 481, 5)
            for day in sorted(rng.sample(range(31), 2)):
                for _ in range(rng.randint(1, 2)):
                    code, airline = rng.choice(AIRLINES)
                    number = f"{code}{rng.randint(100, 999)}"
                    while number in numbers:
                        number = f"{code}{rng.randint(100, 999)}"
                    numbers.add(number)
                    depart = rng.randrange(6 * 60, 16 * 60, 5)
                    base = 55 + 0.42 * duration + rng.uniform(-25, 60)
                    fid = f"f{len(state['flights']) + 1}"
                    state["flights"][fid] = {
                        "flight_id": fid,
                        "airline": airline,
                        "flight_number": number,
                        "origin": origin,
                        "destination": destination,
                        "date": (FIRST_DAY + timedelta(days=day)).isoformat(),
                        "depart": f"{depart // 60:02d}:{depart % 60:02d}",
                        "arrive": f"{(depart + duration) // 60:02d}:{(depart + duration) % 60:02d}",
                        "duration_min": duration,
                        "cabins": {
                            cabin: {
                                "price": _money(int(base * factor) + rng.choice((0.49, 0.99))),
                                "seats_left": rng.randint(0, top),
                            }
                            for cabin, factor, top in (
                                ("economy", 1.0, 9),
                                ("premium_economy", 1.7, 4),
                                ("business", 3.4, 3),
                            )
                        },
                    }
        names: set[str] = set()
        for city in CITIES:
            for _ in range(rng.randint(2, 3)):
                name = f"{rng.choice(HOTEL_WORDS)} {city} {rng.choice(HOTEL_KINDS)}"
                while name in names:
                    name = f"{rng.choice(HOTEL_WORDS)} {city} {rng.choice(HOTEL_KINDS)}"
                names.add(name)
                stars = rng.randint(2, 5)
                hid = f"h{len(state['hotels']) + 1}"
                state["hotels"][hid] = {
                    "hotel_id": hid,
                    "name": name,
                    "city": city,
                    "stars": stars,
                    "price_per_night": _money(rng.randint(45, 95) * stars + 0.99),
                    "rooms_available": rng.randint(0, 6),
                    "amenities": sorted(rng.sample(AMENITIES, rng.randint(1, 4))),
                }
        people = rng.sample([(f, s) for f in FIRST_NAMES for s in LAST_NAMES], 8)
        for i, (first, last) in enumerate(people, start=1):
            state["travellers"][f"t{i}"] = {
                "traveller_id": f"t{i}",
                "name": f"{first} {last}",
                "email": f"{first.lower()}.{last.lower()}@example.com",
                "home_airport": rng.choice(codes),
                "loyalty_tier": rng.choice(TIERS),
            }
        self._seed_bookings(rng, state)
        return state

    def _seed_bookings(self, rng: random.Random, state: dict[str, Any]) -> None:
        """Earlier bookings made through the tools themselves, so the state stays consistent."""
        travellers = sorted(state["travellers"], key=_num)
        while state["next_booking"] <= 18:
            traveller = rng.choice(travellers)
            if rng.random() < 0.5:
                fid, cabin = rng.choice(
                    [
                        (fid, cabin)
                        for fid, f in sorted(state["flights"].items(), key=lambda kv: _num(kv[0]))
                        for cabin in CABINS
                        if f["cabins"][cabin]["seats_left"] > 1
                    ]
                )
                done = self._book_flight(
                    state, {"flight_id": fid, "traveller_id": traveller, "cabin": cabin}
                )
            else:
                hid = rng.choice(
                    [
                        h
                        for h in sorted(state["hotels"], key=_num)
                        if state["hotels"][h]["rooms_available"] > 1
                    ]
                )
                start = rng.randint(0, 25)
                check_in = FIRST_DAY + timedelta(days=start)
                check_out = check_in + timedelta(days=rng.randint(1, min(5, 30 - start)))
                done = self._book_hotel(
                    state,
                    {
                        "hotel_id": hid,
                        "traveller_id": traveller,
                        "check_in": check_in.isoformat(),
                        "check_out": check_out.isoformat(),
                        "rooms": 1,
                    },
                )
            booking_id = done["booking_id"]
            draw = rng.random()
            if draw < 0.55:
                method = rng.choice(PAYMENT_METHODS)
                self._pay_booking(state, {"booking_id": booking_id, "payment_method": method})
            if draw < 0.1 or draw > 0.9:
                self._cancel_booking(state, {"booking_id": booking_id})

    # ---- calls ---------------------------------------------------------------------------

    def call(self, state: dict[str, Any], name: str, arguments: dict[str, Any]) -> Any:
        """Run one validated call; results never share objects with ``state``."""
        return self._handlers[name](state, arguments)

    def _flight(self, state: dict[str, Any], flight_id: str) -> dict[str, Any]:
        return _get(state, "flights", "flight", flight_id)

    def _airport(self, state: dict[str, Any], code: str) -> dict[str, Any]:
        return _get(state, "airports", "airport", code)

    def _search_flights(self, state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        origin, destination = args["origin"], args["destination"]
        self._airport(state, origin)
        self._airport(state, destination)
        if origin == destination:
            raise ToolFailure(
                "failed_precondition", "origin and destination are the same airport; change one"
            )
        cabin = args["cabin"]
        hits = [
            {
                "flight_id": f["flight_id"],
                "airline": f["airline"],
                "flight_number": f["flight_number"],
                "depart": f["depart"],
                "arrive": f["arrive"],
                "duration_min": f["duration_min"],
                "cabin": cabin,
                "price": f["cabins"][cabin]["price"],
                "seats_left": f["cabins"][cabin]["seats_left"],
            }
            for f in state["flights"].values()
            if f["origin"] == origin
            and f["destination"] == destination
            and f["date"] == args["date"]
        ]
        if args.get("sort_by", "departure") == "price":
            hits.sort(key=lambda h: (h["price"], h["depart"], _num(h["flight_id"])))
        else:
            hits.sort(key=lambda h: (h["depart"], _num(h["flight_id"])))
        return {"flights": hits, "count": len(hits)}

    def _get_flight(self, state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        f = self._flight(state, args["flight_id"])
        view = {k: v for k, v in f.items() if k != "cabins"}
        view["origin_city"] = AIRPORTS[f["origin"]]
        view["destination_city"] = AIRPORTS[f["destination"]]
        view["cabins"] = {c: dict(f["cabins"][c]) for c in CABINS}
        return view

    def _search_hotels(self, state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        nights = _nights(args["check_in"], args["check_out"])
        max_price = args.get("max_price")
        min_stars = args.get("min_stars", 1)
        hits = [
            {
                "hotel_id": h["hotel_id"],
                "name": h["name"],
                "stars": h["stars"],
                "price_per_night": h["price_per_night"],
                "total_price": _money(h["price_per_night"] * nights),
                "rooms_available": h["rooms_available"],
            }
            for h in state["hotels"].values()
            if h["city"] == args["city"]
            and h["stars"] >= min_stars
            and (max_price is None or h["price_per_night"] <= max_price)
        ]
        hits.sort(key=lambda h: (h["price_per_night"], _num(h["hotel_id"])))
        return {"hotels": hits, "nights": nights, "count": len(hits)}

    def _get_hotel(self, state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        hotel = _get(state, "hotels", "hotel", args["hotel_id"])
        return {**hotel, "amenities": list(hotel["amenities"])}

    def _new_booking(self, state: dict[str, Any], booking: dict[str, Any]) -> str:
        booking_id = f"b{state['next_booking']}"
        state["next_booking"] += 1
        state["bookings"][booking_id] = {
            "booking_id": booking_id,
            **booking,
            "status": "pending_payment",
            "payment_id": None,
        }
        return booking_id

    def _book_flight(self, state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        traveller_id, cabin = args["traveller_id"], args["cabin"]
        _get(state, "travellers", "traveller", traveller_id)
        f = self._flight(state, args["flight_id"])
        seats = f["cabins"][cabin]
        if seats["seats_left"] < 1:
            raise ToolFailure(
                "failed_precondition",
                f"no {_CABIN_WORDS[cabin]} seats left on flight {f['flight_id']}; "
                "choose another cabin or flight",
            )
        seats["seats_left"] -= 1
        booking_id = self._new_booking(
            state,
            {
                "kind": "flight",
                "traveller_id": traveller_id,
                "flight_id": f["flight_id"],
                "cabin": cabin,
                "origin": f["origin"],
                "destination": f["destination"],
                "date": f["date"],
                "total": seats["price"],
            },
        )
        return {
            "booking_id": booking_id,
            "status": "pending_payment",
            "flight_id": f["flight_id"],
            "cabin": cabin,
            "total": seats["price"],
            "seats_left": seats["seats_left"],
        }

    def _book_hotel(self, state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        traveller_id, rooms = args["traveller_id"], args["rooms"]
        _get(state, "travellers", "traveller", traveller_id)
        hotel = _get(state, "hotels", "hotel", args["hotel_id"])
        nights = _nights(args["check_in"], args["check_out"])
        if hotel["rooms_available"] < rooms:
            raise ToolFailure(
                "failed_precondition",
                f"hotel {hotel['hotel_id']} has {hotel['rooms_available']} rooms available, "
                f"fewer than {rooms}; book fewer rooms or another hotel",
            )
        hotel["rooms_available"] -= rooms
        total = _money(hotel["price_per_night"] * nights * rooms)
        booking_id = self._new_booking(
            state,
            {
                "kind": "hotel",
                "traveller_id": traveller_id,
                "hotel_id": hotel["hotel_id"],
                "city": hotel["city"],
                "check_in": args["check_in"],
                "check_out": args["check_out"],
                "nights": nights,
                "rooms": rooms,
                "total": total,
            },
        )
        return {
            "booking_id": booking_id,
            "status": "pending_payment",
            "hotel_id": hotel["hotel_id"],
            "nights": nights,
            "rooms": rooms,
            "total": total,
            "rooms_left": hotel["rooms_available"],
        }

    def _list_bookings(self, state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        traveller_id = args["traveller_id"]
        _get(state, "travellers", "traveller", traveller_id)
        status = args.get("status")
        found = [
            dict(b)
            for b in state["bookings"].values()
            if b["traveller_id"] == traveller_id and status in (None, b["status"])
        ]
        found.sort(key=lambda b: _num(b["booking_id"]))
        return {"traveller_id": traveller_id, "bookings": found, "count": len(found)}

    def _get_booking(self, state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        return dict(_get(state, "bookings", "booking", args["booking_id"]))

    def _cancel_booking(self, state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        booking = _get(state, "bookings", "booking", args["booking_id"])
        if booking["status"] == "cancelled":
            raise ToolFailure(
                "failed_precondition",
                f"booking {booking['booking_id']} is already cancelled; nothing to do",
            )
        if booking["kind"] == "flight":
            state["flights"][booking["flight_id"]]["cabins"][booking["cabin"]]["seats_left"] += 1
        else:
            state["hotels"][booking["hotel_id"]]["rooms_available"] += booking["rooms"]
        refund, payment_id = 0.0, booking["payment_id"]
        if booking["status"] == "paid":
            payment = state["payments"][payment_id]
            payment["status"] = "refunded"
            refund = payment["amount"]
        booking["status"] = "cancelled"
        return {
            "booking_id": booking["booking_id"],
            "status": "cancelled",
            "refund_amount": refund,
            "refunded_payment_id": payment_id,
        }

    def _pay_booking(self, state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        booking = _get(state, "bookings", "booking", args["booking_id"])
        if booking["status"] == "paid":
            raise ToolFailure(
                "failed_precondition",
                f"booking {booking['booking_id']} is already paid "
                f"(payment {booking['payment_id']}); do not pay twice",
            )
        if booking["status"] == "cancelled":
            raise ToolFailure(
                "failed_precondition",
                f"booking {booking['booking_id']} is cancelled; make a new booking first",
            )
        payment_id = f"pay{state['next_payment']}"
        state["next_payment"] += 1
        state["payments"][payment_id] = {
            "payment_id": payment_id,
            "booking_id": booking["booking_id"],
            "method": args["payment_method"],
            "amount": booking["total"],
            "status": "captured",
        }
        booking["status"] = "paid"
        booking["payment_id"] = payment_id
        return {
            "payment_id": payment_id,
            "booking_id": booking["booking_id"],
            "amount": booking["total"],
            "method": args["payment_method"],
            "status": "paid",
        }

    def _get_payment(self, state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        return dict(_get(state, "payments", "payment", args["payment_id"]))

    def _list_travellers(self, state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        found = [dict(state["travellers"][t]) for t in sorted(state["travellers"], key=_num)]
        return {"travellers": found, "count": len(found)}

    def resources(self, name: str, arguments: dict[str, Any]) -> tuple[list[str], list[str]]:
        """Paths under flights/, hotels/, travellers/, bookings/ and payments/. Creating a
        booking or payment writes its whole collection (the id counter); cancelling writes
        flights, hotels and payments too, since the booking decides which seat, rooms and
        payment change."""
        a = arguments
        if name == "search_flights":
            return ["flights"], []
        if name == "get_flight":
            return [f"flights/{a['flight_id']}"], []
        if name == "search_hotels":
            return ["hotels"], []
        if name == "get_hotel":
            return [f"hotels/{a['hotel_id']}"], []
        if name == "book_flight":
            return [f"travellers/{a['traveller_id']}"], [f"flights/{a['flight_id']}", "bookings"]
        if name == "book_hotel":
            return [f"travellers/{a['traveller_id']}"], [f"hotels/{a['hotel_id']}", "bookings"]
        if name == "list_bookings":
            return [f"travellers/{a['traveller_id']}", "bookings"], []
        if name == "get_booking":
            return [f"bookings/{a['booking_id']}"], []
        if name == "cancel_booking":
            return [], [f"bookings/{a['booking_id']}", "flights", "hotels", "payments"]
        if name == "pay_booking":
            return [], [f"bookings/{a['booking_id']}", "payments"]
        if name == "get_payment":
            return [f"payments/{a['payment_id']}"], []
        if name == "list_travellers":
            return ["travellers"], []
        raise KeyError(name)

    def changes(self, state: dict[str, Any], name: str, arguments: dict[str, Any]) -> list[str]:
        """Finer than :meth:`resources`, from the state before the call: a new booking or
        payment adds one entity under the next id; a cancellation changes its booking, the
        flight or hotel it holds and the payment it refunds."""
        a = arguments
        new_booking = f"bookings/b{state['next_booking']}"
        if name == "book_flight":
            return [f"flights/{a['flight_id']}", new_booking]
        if name == "book_hotel":
            return [f"hotels/{a['hotel_id']}", new_booking]
        if name == "pay_booking":
            return [f"bookings/{a['booking_id']}", f"payments/pay{state['next_payment']}"]
        if name == "cancel_booking":
            booking = state["bookings"].get(a["booking_id"])
            if booking is None:
                return []  # the call fails and changes nothing
            held = (
                f"flights/{booking['flight_id']}"
                if booking["kind"] == "flight"
                else f"hotels/{booking['hotel_id']}"
            )
            paid = [f"payments/{booking['payment_id']}"] if booking["payment_id"] else []
            return [f"bookings/{a['booking_id']}", held, *paid]
        return super().changes(state, name, arguments)

    # ---- tasks ---------------------------------------------------------------------------

    def tasks(self, state: dict[str, Any], seed: int, per_type: int) -> list[Task]:
        """``per_type`` tasks per type, each drawn by cycling the type's templates over
        entities chosen by ``random.Random(seed)``; drafts that repeat an earlier (request,
        reply) or break their type's rules are redrawn. Gold calls run on deep copies of
        ``state``."""
        rng = random.Random(seed)
        makers: dict[str, tuple[_Maker, ...]] = {
            "single": _SINGLE,
            "multiple": _MULTIPLE,
            "parallel": _PARALLEL,
            "dependent": _DEPENDENT,
            "irrelevance": _IRRELEVANCE,
            "clarification": _CLARIFICATION,
        }
        out: list[Task] = []
        for task_type in TASK_TYPES:
            seen: set[tuple[str, str]] = set()
            for k in range(per_type):
                out.append(self._draw(state, rng, task_type, makers[task_type], k, seen))
        return out

    def _draw(
        self,
        state: dict[str, Any],
        rng: random.Random,
        task_type: str,
        makers: tuple[_Maker, ...],
        k: int,
        seen: set[tuple[str, str]],
    ) -> Task:
        """The k-th task of a type: the first draft (template k, then the next ones) that is
        new and keeps the type's rules."""
        for attempt in range(40 * len(makers)):
            run = _Run(self, state)
            draft = makers[(k + attempt // 40) % len(makers)](rng, run)
            if draft is None or (draft.request, draft.reply) in seen:
                continue
            if not _keeps_rules(task_type, draft, run):
                continue
            seen.add((draft.request, draft.reply))
            return Task(
                id=f"travel-{task_type}-{k:04d}",
                task_type=task_type,
                request=draft.request,
                gold_calls=tuple(run.turns),
                answer_facts=draft.facts,
                clarify_reply=draft.reply or Task.clarify_reply,
                hidden_facts=dict(draft.hidden),
            )
        raise ValueError(f"cannot draw {k + 1} distinct {task_type} travel tasks")


# ---- task generation ----------------------------------------------------------------------


@dataclass
class _Draft:
    request: str
    facts: tuple[str, ...]
    reply: str = ""
    hidden: dict[str, str] = field(default_factory=dict)


class _Run:
    """Gold calls of one draft, run turn by turn on a private copy of the initial state."""

    def __init__(self, domain: TravelDomain, state: dict[str, Any]) -> None:
        self.domain = domain
        self.sim = copy.deepcopy(state)
        self.turns: list[tuple[Call, ...]] = []
        self.results: list[list[Any]] = []

    def turn(self, *calls: tuple[str, dict[str, Any]]) -> list[Any]:
        made = tuple(Call(name, args) for name, args in calls)
        results = [self.domain.call(self.sim, c.name, copy.deepcopy(c.arguments)) for c in made]
        self.turns.append(made)
        self.results.append(results)
        return results

    def one(self, name: str, args: dict[str, Any]) -> Any:
        return self.turn((name, args))[0]


_Maker = Callable[[random.Random, _Run], _Draft | None]


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    return []


def _keeps_rules(task_type: str, draft: _Draft, run: _Run) -> bool:
    """Whether a draft has the shape its type asks for (see ``TASK_TYPES``)."""
    turns = run.turns
    dumps = " ".join(json.dumps(r) for rs in run.results for r in rs)
    if not all(f in dumps for f in draft.facts):
        return False
    if task_type == "irrelevance":
        return not turns and not draft.facts
    if not 1 <= len(draft.facts) <= 3:
        return False
    if task_type in ("single", "clarification") and [len(t) for t in turns] != [1]:
        return False
    if task_type == "multiple":
        names = [c.name for t in turns for c in t]
        return 2 <= len(turns) <= 3 and len(set(names)) == len(names) == len(turns)
    if task_type == "parallel":
        calls = turns[0] if len(turns) == 1 else ()
        res = [run.domain.resources(c.name, c.arguments) for c in calls]
        return 2 <= len(calls) <= 4 and not any(
            calls_conflict(res[i], res[j]) for i in range(len(res)) for j in range(i)
        )
    if task_type == "dependent":
        if not 2 <= len(turns) <= 3 or any(len(t) != 1 for t in turns):
            return False
        for i in range(1, len(turns)):
            earlier = " ".join(json.dumps(r) for rs in run.results[:i] for r in rs)
            values = _strings(turns[i][0].arguments)
            if not any(v not in draft.request and v in earlier for v in values):
                return False
    if task_type == "clarification":
        args = _strings(turns[0][0].arguments)
        return bool(draft.hidden) and all(
            v not in draft.request and v in draft.reply and v in args for v in draft.hidden.values()
        )
    return True


def _ids(state: dict[str, Any], collection: str) -> list[str]:
    return sorted(state[collection], key=_num)


def _traveller(rng: random.Random, run: _Run) -> dict[str, Any]:
    return run.sim["travellers"][rng.choice(_ids(run.sim, "travellers"))]


def _who(rng: random.Random, t: dict[str, Any]) -> str:
    return rng.choice(
        [f"traveller {t['traveller_id']}", f"{t['name']} (traveller {t['traveller_id']})"]
    )


def _seat(rng: random.Random, run: _Run) -> tuple[dict[str, Any], str] | None:
    """A flight and cabin with a seat left."""
    open_ = [
        (f, c)
        for fid in _ids(run.sim, "flights")
        for c in CABINS
        if (f := run.sim["flights"][fid])["cabins"][c]["seats_left"] > 0
    ]
    return rng.choice(open_) if open_ else None


def _stay(rng: random.Random) -> tuple[str, str]:
    start = rng.randint(0, 26)
    nights = rng.randint(1, min(5, 30 - start))
    check_in = FIRST_DAY + timedelta(days=start)
    return check_in.isoformat(), (check_in + timedelta(days=nights)).isoformat()


def _hotel(rng: random.Random, run: _Run, rooms: int = 1) -> dict[str, Any] | None:
    ok = [h for h in _ids(run.sim, "hotels") if run.sim["hotels"][h]["rooms_available"] >= rooms]
    return run.sim["hotels"][rng.choice(ok)] if ok else None


def _booking(
    rng: random.Random, run: _Run, statuses: tuple[str, ...] = BOOKING_STATUSES, kind: str = ""
) -> dict[str, Any] | None:
    ok = [
        b
        for b in (run.sim["bookings"][i] for i in _ids(run.sim, "bookings"))
        if b["status"] in statuses and kind in ("", b["kind"])
    ]
    return rng.choice(ok) if ok else None


def _flight_args(f: dict[str, Any], cabin: str) -> dict[str, Any]:
    return {
        "origin": f["origin"],
        "destination": f["destination"],
        "date": f["date"],
        "cabin": cabin,
    }


def _route(f: dict[str, Any], cabin: str) -> str:
    return f"{_CABIN_WORDS[cabin]} flights from {f['origin']} to {f['destination']} on {f['date']}"


def _refund(done: dict[str, Any]) -> str:
    """A cancellation's telling fact: the refund when there was one, else the booking id."""
    return _fact(done["refund_amount"]) if done["refunded_payment_id"] else done["booking_id"]


def _cheapest(hits: list[dict[str, Any]], price: str, left: str, need: int) -> Any:
    """The one cheapest hit with enough availability, or None on none or a price tie."""
    ok = sorted((h for h in hits if h[left] >= need), key=lambda h: h[price])
    if not ok or (len(ok) > 1 and ok[0][price] == ok[1][price]):
        return None
    return ok[0]


# single ---------------------------------------------------------------------------------


def _s_search_flights(rng: random.Random, run: _Run) -> _Draft | None:
    f, cabin = run.sim["flights"][rng.choice(_ids(run.sim, "flights"))], rng.choice(CABINS)
    args = _flight_args(f, cabin)
    by_price = rng.random() < 0.4
    if by_price:
        args["sort_by"] = "price"
    hit = run.one("search_flights", args)["flights"][0]
    order = ", cheapest first" if by_price else ""
    return _Draft(
        f"Can you find {_route(f, cabin)}{order}? I'd like the first option's flight id and fare.",
        (hit["flight_id"], _fact(hit["price"])),
    )


def _s_get_flight(rng: random.Random, run: _Run) -> _Draft | None:
    f = run.sim["flights"][rng.choice(_ids(run.sim, "flights"))]
    view = run.one("get_flight", {"flight_id": f["flight_id"]})
    return _Draft(
        f"When does flight {f['flight_id']} leave and when does it land?",
        (view["depart"], view["arrive"]),
    )


def _s_search_hotels(rng: random.Random, run: _Run) -> _Draft | None:
    city = rng.choice(CITIES)
    check_in, check_out = _stay(rng)
    args: dict[str, Any] = {"city": city, "check_in": check_in, "check_out": check_out}
    extra = ""
    if rng.random() < 0.5:
        prices = sorted(
            h["price_per_night"] for h in run.sim["hotels"].values() if h["city"] == city
        )
        args["max_price"] = int(rng.choice(prices)) + rng.choice((1, 20, 60))
        extra = f" at most {args['max_price']} dollars a night"
    hit = run.one("search_hotels", args)["hotels"][0]
    return _Draft(
        f"Which hotels in {city} have rooms{extra} from {check_in} to {check_out}? "
        "Tell me the cheapest and its total for the stay.",
        (hit["name"], _fact(hit["total_price"])),
    )


def _s_get_hotel(rng: random.Random, run: _Run) -> _Draft | None:
    h = run.sim["hotels"][rng.choice(_ids(run.sim, "hotels"))]
    view = run.one("get_hotel", {"hotel_id": h["hotel_id"]})
    return _Draft(
        f"What is hotel {h['hotel_id']} called, and what does a night there cost?",
        (view["name"], _fact(view["price_per_night"])),
    )


def _s_book_flight(rng: random.Random, run: _Run) -> _Draft | None:
    pick = _seat(rng, run)
    if pick is None:
        return None
    f, cabin = pick
    t = _traveller(rng, run)
    done = run.one(
        "book_flight",
        {"flight_id": f["flight_id"], "traveller_id": t["traveller_id"], "cabin": cabin},
    )
    return _Draft(
        f"Please book {_who(rng, t)} a {_CABIN_WORDS[cabin]} seat on flight {f['flight_id']}.",
        (done["booking_id"], _fact(done["total"])),
    )


def _s_book_hotel(rng: random.Random, run: _Run) -> _Draft | None:
    rooms = rng.randint(1, 2)
    h = _hotel(rng, run, rooms)
    if h is None:
        return None
    t = _traveller(rng, run)
    check_in, check_out = _stay(rng)
    done = run.one(
        "book_hotel",
        {
            "hotel_id": h["hotel_id"],
            "traveller_id": t["traveller_id"],
            "check_in": check_in,
            "check_out": check_out,
            "rooms": rooms,
        },
    )
    room_words = "a room" if rooms == 1 else f"{rooms} rooms"
    return _Draft(
        f"Reserve {room_words} at hotel {h['hotel_id']} for {_who(rng, t)}, checking in "
        f"{check_in} and out {check_out}.",
        (done["booking_id"], _fact(done["total"])),
    )


def _s_list_bookings(rng: random.Random, run: _Run) -> _Draft | None:
    t = _traveller(rng, run)
    args: dict[str, Any] = {"traveller_id": t["traveller_id"]}
    status = rng.choice((None, "paid", "pending_payment"))
    if status:
        args["status"] = status
    found = run.one("list_bookings", args)["bookings"]
    if not found:
        return None
    which = {None: "", "paid": " paid", "pending_payment": " unpaid"}[status]
    return _Draft(
        f"List all{which} bookings of {_who(rng, t)}.",
        tuple(b["booking_id"] for b in found[:3]),
    )


def _s_get_booking(rng: random.Random, run: _Run) -> _Draft | None:
    b = _booking(rng, run)
    if b is None:
        return None
    view = run.one("get_booking", {"booking_id": b["booking_id"]})
    return _Draft(
        f"What's the status of booking {b['booking_id']}, and how much is it?",
        (view["status"], _fact(view["total"])),
    )


def _s_cancel(rng: random.Random, run: _Run) -> _Draft | None:
    b = _booking(rng, run, ("pending_payment", "paid"))
    if b is None:
        return None
    done = run.one("cancel_booking", {"booking_id": b["booking_id"]})
    return _Draft(
        f"Cancel booking {b['booking_id']}, please, and tell me what I get back.",
        (done["status"], _refund(done)),
    )


def _s_pay(rng: random.Random, run: _Run) -> _Draft | None:
    b = _booking(rng, run, ("pending_payment",))
    if b is None:
        return None
    method = rng.choice(PAYMENT_METHODS)
    done = run.one("pay_booking", {"booking_id": b["booking_id"], "payment_method": method})
    return _Draft(
        f"Pay booking {b['booking_id']} with my {method}.",
        (done["payment_id"], _fact(done["amount"])),
    )


def _s_get_payment(rng: random.Random, run: _Run) -> _Draft | None:
    ids = _ids(run.sim, "payments")
    if not ids:
        return None
    view = run.one("get_payment", {"payment_id": rng.choice(ids)})
    return _Draft(
        f"Which booking was payment {view['payment_id']} for, and was it refunded?",
        (view["booking_id"], view["status"]),
    )


def _s_travellers(rng: random.Random, run: _Run) -> _Draft | None:
    found = run.one("list_travellers", {})["travellers"]
    ask = rng.choice(
        (
            "Who are the travellers saved on my account?",
            "List my saved travellers, please.",
            "Which traveller profiles do I have?",
        )
    )
    return _Draft(ask, tuple(t["name"] for t in found[:3]))


_SINGLE: tuple[_Maker, ...] = (
    _s_search_flights,
    _s_book_flight,
    _s_get_flight,
    _s_book_hotel,
    _s_search_hotels,
    _s_cancel,
    _s_get_hotel,
    _s_pay,
    _s_list_bookings,
    _s_get_booking,
    _s_get_payment,
    _s_travellers,
)


# multiple ---------------------------------------------------------------------------------


def _m_flight_and_hotel(rng: random.Random, run: _Run) -> _Draft | None:
    f = run.sim["flights"][rng.choice(_ids(run.sim, "flights"))]
    h = run.sim["hotels"][rng.choice(_ids(run.sim, "hotels"))]
    fv = run.one("get_flight", {"flight_id": f["flight_id"]})
    hv = run.one("get_hotel", {"hotel_id": h["hotel_id"]})
    return _Draft(
        f"Two things: when does flight {f['flight_id']} depart, and what is hotel "
        f"{h['hotel_id']} called?",
        (fv["depart"], hv["name"]),
    )


def _m_trip_search(rng: random.Random, run: _Run) -> _Draft | None:
    f, cabin = run.sim["flights"][rng.choice(_ids(run.sim, "flights"))], rng.choice(CABINS)
    arrival = date.fromisoformat(f["date"])
    nights = rng.randint(1, 4)
    if arrival + timedelta(days=nights) > LAST_DAY:
        return None
    city = AIRPORTS[f["destination"]]
    check_out = (arrival + timedelta(days=nights)).isoformat()
    hit = run.one("search_flights", _flight_args(f, cabin))["flights"][0]
    hotel = run.one("search_hotels", {"city": city, "check_in": f["date"], "check_out": check_out})[
        "hotels"
    ][0]
    return _Draft(
        f"Look up {_route(f, cabin)}, and also hotels in {city} from {f['date']} to "
        f"{check_out}. What's the first flight and the cheapest hotel?",
        (hit["flight_id"], hotel["name"]),
    )


def _m_book_hotel_then_list(rng: random.Random, run: _Run) -> _Draft | None:
    h = _hotel(rng, run)
    if h is None:
        return None
    t = _traveller(rng, run)
    check_in, check_out = _stay(rng)
    done = run.one(
        "book_hotel",
        {
            "hotel_id": h["hotel_id"],
            "traveller_id": t["traveller_id"],
            "check_in": check_in,
            "check_out": check_out,
            "rooms": 1,
        },
    )
    listed = run.one("list_bookings", {"traveller_id": t["traveller_id"]})
    return _Draft(
        f"Book one room at hotel {h['hotel_id']} for {_who(rng, t)} from {check_in} to "
        f"{check_out}, then show me all of their bookings.",
        (done["booking_id"], _fact(done["total"]), listed["bookings"][0]["booking_id"]),
    )


def _m_cancel_then_show(rng: random.Random, run: _Run) -> _Draft | None:
    b = _booking(rng, run, ("pending_payment", "paid"))
    if b is None:
        return None
    done = run.one("cancel_booking", {"booking_id": b["booking_id"]})
    view = run.one("get_booking", {"booking_id": b["booking_id"]})
    return _Draft(
        f"Cancel booking {b['booking_id']} and then pull it up again so I can see it's gone.",
        (view["status"], _refund(done)),
    )


def _m_pay_then_show(rng: random.Random, run: _Run) -> _Draft | None:
    b = _booking(rng, run, ("pending_payment",))
    if b is None:
        return None
    method = rng.choice(PAYMENT_METHODS)
    done = run.one("pay_booking", {"booking_id": b["booking_id"], "payment_method": method})
    view = run.one("get_booking", {"booking_id": b["booking_id"]})
    return _Draft(
        f"Settle booking {b['booking_id']} using {method}, then show me the booking.",
        (done["payment_id"], _fact(done["amount"]), view["status"]),
    )


def _m_search_inspect_book(rng: random.Random, run: _Run) -> _Draft | None:
    pick = _seat(rng, run)
    if pick is None:
        return None
    f, cabin = pick
    t = _traveller(rng, run)
    run.one("search_flights", _flight_args(f, cabin))
    view = run.one("get_flight", {"flight_id": f["flight_id"]})
    done = run.one(
        "book_flight",
        {"flight_id": f["flight_id"], "traveller_id": t["traveller_id"], "cabin": cabin},
    )
    return _Draft(
        f"Show me the {_route(f, cabin)}, give me the details of flight {f['flight_id']}, and "
        f"book {_who(rng, t)} on it in {_CABIN_WORDS[cabin]}.",
        (view["flight_number"], done["booking_id"], _fact(done["total"])),
    )


def _m_travellers_and_payment(rng: random.Random, run: _Run) -> _Draft | None:
    ids = _ids(run.sim, "payments")
    if not ids:
        return None
    found = run.one("list_travellers", {})
    view = run.one("get_payment", {"payment_id": rng.choice(ids)})
    return _Draft(
        f"Who are the first two travellers saved on my account? Also, how much was payment "
        f"{view['payment_id']}?",
        (found["travellers"][0]["name"], found["travellers"][1]["name"], _fact(view["amount"])),
    )


def _m_book_flight_and_hotel_info(rng: random.Random, run: _Run) -> _Draft | None:
    pick = _seat(rng, run)
    if pick is None:
        return None
    f, cabin = pick
    t = _traveller(rng, run)
    h = run.sim["hotels"][rng.choice(_ids(run.sim, "hotels"))]
    done = run.one(
        "book_flight",
        {"flight_id": f["flight_id"], "traveller_id": t["traveller_id"], "cabin": cabin},
    )
    hv = run.one("get_hotel", {"hotel_id": h["hotel_id"]})
    return _Draft(
        f"Book {_who(rng, t)} in {_CABIN_WORDS[cabin]} on flight {f['flight_id']}, and tell me "
        f"the nightly price at hotel {h['hotel_id']}.",
        (done["booking_id"], _fact(hv["price_per_night"])),
    )


_MULTIPLE: tuple[_Maker, ...] = (
    _m_flight_and_hotel,
    _m_book_hotel_then_list,
    _m_trip_search,
    _m_cancel_then_show,
    _m_travellers_and_payment,
    _m_pay_then_show,
    _m_search_inspect_book,
    _m_book_flight_and_hotel_info,
)


# parallel ---------------------------------------------------------------------------------


def _p_flights(rng: random.Random, run: _Run) -> _Draft | None:
    ids = rng.sample(_ids(run.sim, "flights"), rng.randint(2, 4))
    views = run.turn(*(("get_flight", {"flight_id": i}) for i in ids))
    return _Draft(
        f"What are the departure times of flights {', '.join(ids[:-1])} and {ids[-1]}?",
        tuple(v["depart"] for v in views[:3]),
    )


def _p_hotels(rng: random.Random, run: _Run) -> _Draft | None:
    ids = rng.sample(_ids(run.sim, "hotels"), rng.randint(2, 4))
    views = run.turn(*(("get_hotel", {"hotel_id": i}) for i in ids))
    return _Draft(
        f"Compare the nightly prices of hotels {', '.join(ids[:-1])} and {ids[-1]}.",
        tuple(_fact(v["price_per_night"]) for v in views[:3]),
    )


def _p_bookings(rng: random.Random, run: _Run) -> _Draft | None:
    ids = rng.sample(_ids(run.sim, "bookings"), rng.randint(2, 3))
    views = run.turn(*(("get_booking", {"booking_id": i}) for i in ids))
    return _Draft(
        f"What are the totals of bookings {', '.join(ids[:-1])} and {ids[-1]}?",
        tuple(_fact(v["total"]) for v in views),
    )


def _p_payments(rng: random.Random, run: _Run) -> _Draft | None:
    ids = _ids(run.sim, "payments")
    if len(ids) < 2:
        return None
    chosen = rng.sample(ids, 2)
    views = run.turn(*(("get_payment", {"payment_id": i}) for i in chosen))
    return _Draft(
        f"Which bookings do payments {chosen[0]} and {chosen[1]} belong to?",
        tuple(v["booking_id"] for v in views),
    )


def _p_trip_search(rng: random.Random, run: _Run) -> _Draft | None:
    f, cabin = run.sim["flights"][rng.choice(_ids(run.sim, "flights"))], rng.choice(CABINS)
    city = rng.choice(CITIES)
    check_in, check_out = _stay(rng)
    flights, hotels = run.turn(
        ("search_flights", _flight_args(f, cabin)),
        ("search_hotels", {"city": city, "check_in": check_in, "check_out": check_out}),
    )
    return _Draft(
        f"At the same time, search {_route(f, cabin)} and hotels in {city} from {check_in} to "
        f"{check_out}; tell me the first flight and the cheapest hotel.",
        (flights["flights"][0]["flight_id"], hotels["hotels"][0]["name"]),
    )


def _p_pay_and_look(rng: random.Random, run: _Run) -> _Draft | None:
    b = _booking(rng, run, ("pending_payment",))
    if b is None:
        return None
    method = rng.choice(PAYMENT_METHODS)
    f = rng.choice(_ids(run.sim, "flights"))
    h = rng.choice(_ids(run.sim, "hotels"))
    paid, fv, hv = run.turn(
        ("pay_booking", {"booking_id": b["booking_id"], "payment_method": method}),
        ("get_flight", {"flight_id": f}),
        ("get_hotel", {"hotel_id": h}),
    )
    return _Draft(
        f"Pay booking {b['booking_id']} by {method}; meanwhile tell me when flight {f} lands "
        f"and the name of hotel {h}.",
        (paid["payment_id"], fv["arrive"], hv["name"]),
    )


def _p_book_and_look(rng: random.Random, run: _Run) -> _Draft | None:
    pick = _seat(rng, run)
    ids = _ids(run.sim, "payments")
    if pick is None or not ids:
        return None
    f, cabin = pick
    t = _traveller(rng, run)
    h = rng.choice(_ids(run.sim, "hotels"))
    p = rng.choice(ids)
    done, hv, pv = run.turn(
        (
            "book_flight",
            {"flight_id": f["flight_id"], "traveller_id": t["traveller_id"], "cabin": cabin},
        ),
        ("get_hotel", {"hotel_id": h}),
        ("get_payment", {"payment_id": p}),
    )
    return _Draft(
        f"Book {_who(rng, t)} a {_CABIN_WORDS[cabin]} seat on flight {f['flight_id']}, and "
        f"in parallel look up hotel {h}'s name and the amount of payment {p}.",
        (done["booking_id"], hv["name"], _fact(pv["amount"])),
    )


def _p_cancel_and_look(rng: random.Random, run: _Run) -> _Draft | None:
    b = _booking(rng, run, ("pending_payment", "paid"))
    if b is None:
        return None
    others = [i for i in _ids(run.sim, "bookings") if i != b["booking_id"]]
    other = rng.choice(others)
    done, ov, tv = run.turn(
        ("cancel_booking", {"booking_id": b["booking_id"]}),
        ("get_booking", {"booking_id": other}),
        ("list_travellers", {}),
    )
    return _Draft(
        f"Cancel booking {b['booking_id']}. While you're at it, what's the status of booking "
        f"{other}, and who is the first of my saved travellers?",
        (_refund(done), ov["status"], tv["travellers"][0]["name"]),
    )


def _p_hotel_booking_and_flight(rng: random.Random, run: _Run) -> _Draft | None:
    h = _hotel(rng, run)
    if h is None:
        return None
    t = _traveller(rng, run)
    check_in, check_out = _stay(rng)
    f = rng.choice(_ids(run.sim, "flights"))
    done, fv = run.turn(
        (
            "book_hotel",
            {
                "hotel_id": h["hotel_id"],
                "traveller_id": t["traveller_id"],
                "check_in": check_in,
                "check_out": check_out,
                "rooms": 1,
            },
        ),
        ("get_flight", {"flight_id": f}),
    )
    return _Draft(
        f"Book a room at hotel {h['hotel_id']} for {_who(rng, t)} from {check_in} to "
        f"{check_out}, and at the same time check flight {f}'s flight number.",
        (done["booking_id"], fv["flight_number"]),
    )


_PARALLEL: tuple[_Maker, ...] = (
    _p_flights,
    _p_pay_and_look,
    _p_hotels,
    _p_book_and_look,
    _p_bookings,
    _p_cancel_and_look,
    _p_trip_search,
    _p_hotel_booking_and_flight,
    _p_payments,
)


# dependent ---------------------------------------------------------------------------------


def _d_search_then_book(rng: random.Random, run: _Run) -> _Draft | None:
    f, cabin = run.sim["flights"][rng.choice(_ids(run.sim, "flights"))], rng.choice(CABINS)
    t = _traveller(rng, run)
    found = run.one("search_flights", _flight_args(f, cabin))["flights"]
    best = _cheapest(found, "price", "seats_left", 1)
    if best is None:
        return None
    done = run.one(
        "book_flight",
        {"flight_id": best["flight_id"], "traveller_id": t["traveller_id"], "cabin": cabin},
    )
    facts: tuple[str, ...] = (done["booking_id"], _fact(done["total"]))
    pay = ""
    if rng.random() < 0.5:
        method = rng.choice(PAYMENT_METHODS)
        paid = run.one("pay_booking", {"booking_id": done["booking_id"], "payment_method": method})
        facts = (done["booking_id"], paid["payment_id"], _fact(paid["amount"]))
        pay = f" and pay for it with {method}"
    return _Draft(
        f"Find {_route(f, cabin)} and book {_who(rng, t)} on the cheapest one that still has "
        f"seats{pay}.",
        facts,
    )


def _d_search_then_book_hotel(rng: random.Random, run: _Run) -> _Draft | None:
    city = rng.choice(CITIES)
    check_in, check_out = _stay(rng)
    rooms = rng.randint(1, 2)
    t = _traveller(rng, run)
    found = run.one("search_hotels", {"city": city, "check_in": check_in, "check_out": check_out})
    best = _cheapest(found["hotels"], "price_per_night", "rooms_available", rooms)
    if best is None:
        return None
    done = run.one(
        "book_hotel",
        {
            "hotel_id": best["hotel_id"],
            "traveller_id": t["traveller_id"],
            "check_in": check_in,
            "check_out": check_out,
            "rooms": rooms,
        },
    )
    room_words = "a room" if rooms == 1 else f"{rooms} rooms"
    return _Draft(
        f"Book {room_words} for {_who(rng, t)} at the cheapest hotel in {city} with enough "
        f"space, from {check_in} to {check_out}.",
        (best["name"], done["booking_id"], _fact(done["total"])),
    )


def _d_booking_flight(rng: random.Random, run: _Run) -> _Draft | None:
    b = _booking(rng, run, kind="flight")
    if b is None:
        return None
    view = run.one("get_booking", {"booking_id": b["booking_id"]})
    fv = run.one("get_flight", {"flight_id": view["flight_id"]})
    return _Draft(
        f"What time does the flight in booking {b['booking_id']} take off, and what's its "
        "flight number?",
        (fv["depart"], fv["flight_number"]),
    )


def _d_booking_hotel(rng: random.Random, run: _Run) -> _Draft | None:
    b = _booking(rng, run, kind="hotel")
    if b is None:
        return None
    view = run.one("get_booking", {"booking_id": b["booking_id"]})
    hv = run.one("get_hotel", {"hotel_id": view["hotel_id"]})
    return _Draft(
        f"Which hotel is booking {b['booking_id']} at, and which amenities does it offer?",
        (hv["name"], *hv["amenities"][:2]),
    )


def _d_book_then_pay(rng: random.Random, run: _Run) -> _Draft | None:
    pick = _seat(rng, run)
    if pick is None:
        return None
    f, cabin = pick
    t = _traveller(rng, run)
    method = rng.choice(PAYMENT_METHODS)
    done = run.one(
        "book_flight",
        {"flight_id": f["flight_id"], "traveller_id": t["traveller_id"], "cabin": cabin},
    )
    paid = run.one("pay_booking", {"booking_id": done["booking_id"], "payment_method": method})
    return _Draft(
        f"Put {_who(rng, t)} on flight {f['flight_id']} in {_CABIN_WORDS[cabin]} and pay for "
        f"the booking with {method} right away.",
        (done["booking_id"], paid["payment_id"], _fact(paid["amount"])),
    )


def _d_pay_then_receipt(rng: random.Random, run: _Run) -> _Draft | None:
    b = _booking(rng, run, ("pending_payment",))
    if b is None:
        return None
    method = rng.choice(PAYMENT_METHODS)
    paid = run.one("pay_booking", {"booking_id": b["booking_id"], "payment_method": method})
    view = run.one("get_payment", {"payment_id": paid["payment_id"]})
    return _Draft(
        f"Pay booking {b['booking_id']} with {method}, then fetch the payment record to "
        "confirm it went through.",
        (view["payment_id"], view["status"], _fact(view["amount"])),
    )


def _d_traveller_bookings(rng: random.Random, run: _Run) -> _Draft | None:
    t = _traveller(rng, run)
    found = run.one("list_travellers", {})["travellers"]
    match = next(x for x in found if x["name"] == t["name"])
    listed = run.one("list_bookings", {"traveller_id": match["traveller_id"]})
    if not listed["bookings"]:
        return None
    return _Draft(
        f"What bookings does {t['name']} have?",
        tuple(b["booking_id"] for b in listed["bookings"][:3]),
    )


def _d_payment_then_cancel(rng: random.Random, run: _Run) -> _Draft | None:
    live = [p for p in _ids(run.sim, "payments") if run.sim["payments"][p]["status"] == "captured"]
    if not live:
        return None
    p = rng.choice(live)
    view = run.one("get_payment", {"payment_id": p})
    done = run.one("cancel_booking", {"booking_id": view["booking_id"]})
    return _Draft(
        f"I no longer need the trip I paid for with payment {p}; cancel that booking and "
        "tell me the refund.",
        (done["booking_id"], _refund(done)),
    )


def _d_hotel_at_destination(rng: random.Random, run: _Run) -> _Draft | None:
    b = _booking(rng, run, ("pending_payment", "paid"), kind="flight")
    nights = rng.randint(1, 3)
    if b is None or date.fromisoformat(b["date"]) + timedelta(days=nights) > LAST_DAY:
        return None
    view = run.one("get_booking", {"booking_id": b["booking_id"]})
    fv = run.one("get_flight", {"flight_id": view["flight_id"]})
    arrival = date.fromisoformat(fv["date"])
    found = run.one(
        "search_hotels",
        {
            "city": fv["destination_city"],
            "check_in": fv["date"],
            "check_out": (arrival + timedelta(days=nights)).isoformat(),
        },
    )
    night_words = "one night" if nights == 1 else f"{nights} nights"
    return _Draft(
        f"Find hotels for {night_words} in the city that booking {b['booking_id']} flies to, "
        "starting on the day of the flight. Which is cheapest?",
        (found["hotels"][0]["name"], _fact(found["hotels"][0]["total_price"])),
    )


_DEPENDENT: tuple[_Maker, ...] = (
    _d_search_then_book,
    _d_booking_flight,
    _d_book_then_pay,
    _d_booking_hotel,
    _d_pay_then_receipt,
    _d_traveller_bookings,
    _d_search_then_book_hotel,
    _d_hotel_at_destination,
    _d_payment_then_cancel,
)


# irrelevance -------------------------------------------------------------------------------

_TOPICS = ("the sea", "autumn", "a lighthouse", "coffee", "a lost suitcase", "the moon")
_LANGUAGES = ("French", "German", "Japanese", "Portuguese", "Swahili")
_PHRASES = ("good morning", "where is the station", "thank you very much", "the bill, please")
_DISHES = ("paella", "ramen", "shakshuka", "risotto", "pho")


def _i_poem(rng: random.Random, run: _Run) -> _Draft | None:
    form = rng.choice(("a haiku", "a limerick", "a short poem", "a sonnet"))
    return _Draft(f"Write me {form} about {rng.choice(_TOPICS)}.", ())


def _i_weather(rng: random.Random, run: _Run) -> _Draft | None:
    day = FIRST_DAY + timedelta(days=rng.randint(0, 30))
    return _Draft(f"Will it rain in {rng.choice(CITIES)} on {day.isoformat()}?", ())


def _i_maths(rng: random.Random, run: _Run) -> _Draft | None:
    a, b = rng.randint(12, 99), rng.randint(12, 99)
    op = rng.choice(("times", "plus", "minus"))
    return _Draft(f"Quick maths question: what is {a} {op} {b}?", ())


def _i_translate(rng: random.Random, run: _Run) -> _Draft | None:
    phrase, language = rng.choice(_PHRASES), rng.choice(_LANGUAGES)
    return _Draft(f"How do I say '{phrase}' in {language}?", ())


def _i_recipe(rng: random.Random, run: _Run) -> _Draft | None:
    people = rng.randint(2, 8)
    return _Draft(f"Give me a recipe for {rng.choice(_DISHES)} for {people} people.", ())


def _i_trivia(rng: random.Random, run: _Run) -> _Draft | None:
    city = rng.choice(CITIES)
    ask = rng.choice(("the population of", "the best museum in", "a short history of"))
    return _Draft(f"Tell me {ask} {city}.", ())


_IRRELEVANCE: tuple[_Maker, ...] = (
    _i_poem,
    _i_weather,
    _i_maths,
    _i_translate,
    _i_recipe,
    _i_trivia,
)


# clarification ------------------------------------------------------------------------------


def _c_cabin(rng: random.Random, run: _Run) -> _Draft | None:
    pick = _seat(rng, run)
    if pick is None:
        return None
    f, cabin = pick
    t = _traveller(rng, run)
    done = run.one(
        "book_flight",
        {"flight_id": f["flight_id"], "traveller_id": t["traveller_id"], "cabin": cabin},
    )
    return _Draft(
        f"Please book {_who(rng, t)} on flight {f['flight_id']}.",
        (done["booking_id"], _fact(done["total"])),
        reply=f"The {cabin} cabin, please.",
        hidden={"cabin": cabin},
    )


def _c_cancel(rng: random.Random, run: _Run) -> _Draft | None:
    b = _booking(rng, run, ("pending_payment", "paid"))
    if b is None:
        return None
    done = run.one("cancel_booking", {"booking_id": b["booking_id"]})
    return _Draft(
        rng.choice(("I need to cancel one of my bookings.", "Please cancel my booking.")),
        (done["status"], _refund(done)),
        reply=f"It's booking {b['booking_id']}.",
        hidden={"booking_id": b["booking_id"]},
    )


def _c_method(rng: random.Random, run: _Run) -> _Draft | None:
    b = _booking(rng, run, ("pending_payment",))
    if b is None:
        return None
    method = rng.choice(PAYMENT_METHODS)
    done = run.one("pay_booking", {"booking_id": b["booking_id"], "payment_method": method})
    return _Draft(
        f"I'd like to pay for booking {b['booking_id']} now.",
        (done["payment_id"], _fact(done["amount"])),
        reply=f"Use my {method}.",
        hidden={"payment_method": method},
    )


def _c_date(rng: random.Random, run: _Run) -> _Draft | None:
    f, cabin = run.sim["flights"][rng.choice(_ids(run.sim, "flights"))], rng.choice(CABINS)
    hit = run.one("search_flights", _flight_args(f, cabin))["flights"][0]
    return _Draft(
        f"Find me {_CABIN_WORDS[cabin]} flights from {f['origin']} to {f['destination']}.",
        (hit["flight_id"], _fact(hit["price"])),
        reply=f"I want to fly on {f['date']}.",
        hidden={"date": f["date"]},
    )


def _c_check_out(rng: random.Random, run: _Run) -> _Draft | None:
    h = _hotel(rng, run)
    if h is None:
        return None
    t = _traveller(rng, run)
    check_in, check_out = _stay(rng)
    done = run.one(
        "book_hotel",
        {
            "hotel_id": h["hotel_id"],
            "traveller_id": t["traveller_id"],
            "check_in": check_in,
            "check_out": check_out,
            "rooms": 1,
        },
    )
    return _Draft(
        f"Book one room at hotel {h['hotel_id']} for {_who(rng, t)}, arriving {check_in}.",
        (done["booking_id"], _fact(done["total"])),
        reply=f"I'll check out on {check_out}.",
        hidden={"check_out": check_out},
    )


def _c_booking(rng: random.Random, run: _Run) -> _Draft | None:
    b = _booking(rng, run)
    if b is None:
        return None
    view = run.one("get_booking", {"booking_id": b["booking_id"]})
    return _Draft(
        rng.choice(("What's the status of my booking?", "Can you check on my booking?")),
        (view["status"], _fact(view["total"])),
        reply=f"Booking {b['booking_id']}.",
        hidden={"booking_id": b["booking_id"]},
    )


def _c_traveller(rng: random.Random, run: _Run) -> _Draft | None:
    pick = _seat(rng, run)
    if pick is None:
        return None
    f, cabin = pick
    t = _traveller(rng, run)
    done = run.one(
        "book_flight",
        {"flight_id": f["flight_id"], "traveller_id": t["traveller_id"], "cabin": cabin},
    )
    return _Draft(
        f"Book a {_CABIN_WORDS[cabin]} seat on flight {f['flight_id']}.",
        (done["booking_id"], _fact(done["total"])),
        reply=f"It's for {t['name']}, traveller {t['traveller_id']}.",
        hidden={"traveller_id": t["traveller_id"]},
    )


def _c_city(rng: random.Random, run: _Run) -> _Draft | None:
    city = rng.choice(CITIES)
    check_in, check_out = _stay(rng)
    hit = run.one("search_hotels", {"city": city, "check_in": check_in, "check_out": check_out})[
        "hotels"
    ][0]
    return _Draft(
        f"Find me a hotel from {check_in} to {check_out}; what's the cheapest?",
        (hit["name"], _fact(hit["total_price"])),
        reply=f"In {city}.",
        hidden={"city": city},
    )


def _c_flight(rng: random.Random, run: _Run) -> _Draft | None:
    f = run.sim["flights"][rng.choice(_ids(run.sim, "flights"))]
    view = run.one("get_flight", {"flight_id": f["flight_id"]})
    return _Draft(
        rng.choice(("When does my flight land?", "What time does my flight arrive?")),
        (view["arrive"], view["destination"]),
        reply=f"Flight {f['flight_id']}.",
        hidden={"flight_id": f["flight_id"]},
    )


_CLARIFICATION: tuple[_Maker, ...] = (
    _c_cabin,
    _c_date,
    _c_cancel,
    _c_booking,
    _c_method,
    _c_city,
    _c_check_out,
    _c_flight,
    _c_traveller,
)
