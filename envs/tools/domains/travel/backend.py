"""The travel backend: seeded state, tool implementations and resource paths.

The state holds flights, hotels, travellers, bookings and payments; besides the resource
paths of calls, :func:`changes` names the finer paths a write changes.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from datetime import date, timedelta
from typing import Any

from agentgym.envs.tools.backend import entity, failed_precondition
from agentgym.envs.tools.backend import id_number as _num
from agentgym.envs.tools.domains.travel.tools import (
    AIRPORTS,
    AMENITIES,
    CABIN_WORDS,
    CABINS,
    CITIES,
    FIRST_DAY,
    LAST_DAY,
    MAX_NIGHTS,
    PAYMENT_METHODS,
    TIERS,
)
from agentgym.envs.tools.scheduler import conflicts

AIRLINES = (("AU", "Aurora Air"), ("BJ", "Bluejay Airlines"), ("CB", "Cobalt Airways"))
HOTEL_WORDS = ("Grand", "Harbor", "Garden", "Central", "Riverside", "Summit", "Royal", "Park")
HOTEL_KINDS = ("Hotel", "Inn", "Suites", "Lodge")
FIRST_NAMES = ("Maya", "Liam", "Sofia", "Noah", "Amara", "Lucas", "Iris", "Mateo", "Hana")
LAST_NAMES = ("Chen", "Okafor", "Rossi", "Larsen", "Patel", "Moreau", "Silva", "Novak", "Kim")
_CABIN_PRICING = (("economy", 1.0, 9), ("premium_economy", 1.7, 4), ("business", 3.4, 3))
"""Per cabin: the factor on the base fare and the most seats a flight may have left."""
_DATE_RE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")


def calls_conflict(first: tuple[list[str], list[str]], second: tuple[list[str], list[str]]) -> bool:
    """Whether two calls' (read, written) resources conflict.

    They do when one writes a path equal to, above or below a path the other reads or writes.
    """
    return conflicts(*first, *second)


def _money(x: float) -> float:
    return round(x, 2)


def _day(text: str) -> date:
    if not _DATE_RE.match(text):
        raise failed_precondition(f"{text!r} is not a date; use YYYY-MM-DD")
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise failed_precondition(f"{text!r} is not a calendar date; use YYYY-MM-DD") from None


def _nights(check_in: str, check_out: str) -> int:
    """Nights of a stay; raises unless it lies in the bookable window."""
    start, end = _day(check_in), _day(check_out)
    if start < FIRST_DAY or end > LAST_DAY:
        raise failed_precondition(
            f"stays must lie between {FIRST_DAY} and {LAST_DAY}; choose dates in that window"
        )
    nights = (end - start).days
    if nights < 1:
        raise failed_precondition("check_out must be after check_in; pick a later check-out")
    if nights > MAX_NIGHTS:
        raise failed_precondition(f"a stay can last at most {MAX_NIGHTS} nights; split it")
    return nights


# ---- state ---------------------------------------------------------------------------------


def build(seed: int) -> dict[str, Any]:
    """The initial state, all drawn from ``random.Random(seed)``.

    Ten airports, about 40 flights, 25 hotels, 8 travellers and 18 earlier bookings (some
    paid, some cancelled).
    """
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
    _add_flights(rng, state, codes)
    _add_hotels(rng, state)
    people = rng.sample([(f, s) for f in FIRST_NAMES for s in LAST_NAMES], 8)
    for i, (first, last) in enumerate(people, start=1):
        state["travellers"][f"t{i}"] = {
            "traveller_id": f"t{i}",
            "name": f"{first} {last}",
            "email": f"{first.lower()}.{last.lower()}@example.com",
            "home_airport": rng.choice(codes),
            "loyalty_tier": rng.choice(TIERS),
        }
    _seed_bookings(rng, state)
    return state


def _add_flights(rng: random.Random, state: dict[str, Any], codes: list[str]) -> None:
    """Fourteen routes, each flown on two days by one or two flights."""
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
                        for cabin, factor, top in _CABIN_PRICING
                    },
                }


def _add_hotels(rng: random.Random, state: dict[str, Any]) -> None:
    """Two or three hotels of distinct names in every city."""
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


def _seed_bookings(rng: random.Random, state: dict[str, Any]) -> None:
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
            done = _book_flight(
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
            stay = {"check_in": check_in.isoformat(), "check_out": check_out.isoformat()}
            done = _book_hotel(
                state, {"hotel_id": hid, "traveller_id": traveller, **stay, "rooms": 1}
            )
        booking_id = done["booking_id"]
        draw = rng.random()
        if draw < 0.55:
            method = rng.choice(PAYMENT_METHODS)
            _pay_booking(state, {"booking_id": booking_id, "payment_method": method})
        if draw < 0.1 or draw > 0.9:
            _cancel_booking(state, {"booking_id": booking_id})


# ---- calls ---------------------------------------------------------------------------------


def call(state: dict[str, Any], name: str, arguments: dict[str, Any]) -> Any:
    """Run one validated call; results never share objects with ``state``.

    Args:
        state: the backend state, changed in place by writes.
        name: a tool name.
        arguments: the call's arguments, valid for the tool's schema.

    Returns:
        The call's JSON-able result.
    """
    return _HANDLERS[name](state, arguments)


def _flight(state: dict[str, Any], flight_id: str) -> dict[str, Any]:
    return entity(state, "flights", "flight", flight_id)


def _search_flights(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    origin, destination = args["origin"], args["destination"]
    entity(state, "airports", "airport", origin)
    entity(state, "airports", "airport", destination)
    if origin == destination:
        raise failed_precondition("origin and destination are the same airport; change one")
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
        if f["origin"] == origin and f["destination"] == destination and f["date"] == args["date"]
    ]
    if args.get("sort_by", "departure") == "price":
        hits.sort(key=lambda h: (h["price"], h["depart"], _num(h["flight_id"])))
    else:
        hits.sort(key=lambda h: (h["depart"], _num(h["flight_id"])))
    return {"flights": hits, "count": len(hits)}


def _get_flight(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    f = _flight(state, args["flight_id"])
    view = {k: v for k, v in f.items() if k != "cabins"}
    view["origin_city"] = AIRPORTS[f["origin"]]
    view["destination_city"] = AIRPORTS[f["destination"]]
    view["cabins"] = {c: dict(f["cabins"][c]) for c in CABINS}
    return view


def _search_hotels(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
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


def _get_hotel(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    hotel = entity(state, "hotels", "hotel", args["hotel_id"])
    return {**hotel, "amenities": list(hotel["amenities"])}


def _new_booking(state: dict[str, Any], booking: dict[str, Any]) -> str:
    booking_id = f"b{state['next_booking']}"
    state["next_booking"] += 1
    state["bookings"][booking_id] = {
        "booking_id": booking_id,
        **booking,
        "status": "pending_payment",
        "payment_id": None,
    }
    return booking_id


def _book_flight(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    traveller_id, cabin = args["traveller_id"], args["cabin"]
    entity(state, "travellers", "traveller", traveller_id)
    f = _flight(state, args["flight_id"])
    seats = f["cabins"][cabin]
    if seats["seats_left"] < 1:
        raise failed_precondition(
            f"no {CABIN_WORDS[cabin]} seats left on flight {f['flight_id']}; "
            "choose another cabin or flight"
        )
    seats["seats_left"] -= 1
    booking_id = _new_booking(
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


def _book_hotel(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    traveller_id, rooms = args["traveller_id"], args["rooms"]
    entity(state, "travellers", "traveller", traveller_id)
    hotel = entity(state, "hotels", "hotel", args["hotel_id"])
    nights = _nights(args["check_in"], args["check_out"])
    if hotel["rooms_available"] < rooms:
        raise failed_precondition(
            f"hotel {hotel['hotel_id']} has {hotel['rooms_available']} rooms available, "
            f"fewer than {rooms}; book fewer rooms or another hotel"
        )
    hotel["rooms_available"] -= rooms
    total = _money(hotel["price_per_night"] * nights * rooms)
    booking_id = _new_booking(
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


def _list_bookings(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    traveller_id = args["traveller_id"]
    entity(state, "travellers", "traveller", traveller_id)
    status = args.get("status")
    found = [
        dict(b)
        for b in state["bookings"].values()
        if b["traveller_id"] == traveller_id and status in (None, b["status"])
    ]
    found.sort(key=lambda b: _num(b["booking_id"]))
    return {"traveller_id": traveller_id, "bookings": found, "count": len(found)}


def _get_booking(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    return dict(entity(state, "bookings", "booking", args["booking_id"]))


def _cancel_booking(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    booking = entity(state, "bookings", "booking", args["booking_id"])
    if booking["status"] == "cancelled":
        raise failed_precondition(
            f"booking {booking['booking_id']} is already cancelled; nothing to do"
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


def _pay_booking(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    booking = entity(state, "bookings", "booking", args["booking_id"])
    if booking["status"] == "paid":
        raise failed_precondition(
            f"booking {booking['booking_id']} is already paid "
            f"(payment {booking['payment_id']}); do not pay twice"
        )
    if booking["status"] == "cancelled":
        raise failed_precondition(
            f"booking {booking['booking_id']} is cancelled; make a new booking first"
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


def _get_payment(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    return dict(entity(state, "payments", "payment", args["payment_id"]))


def _list_travellers(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    found = [dict(state["travellers"][t]) for t in sorted(state["travellers"], key=_num)]
    return {"travellers": found, "count": len(found)}


_HANDLERS: dict[str, Callable[[dict[str, Any], dict[str, Any]], Any]] = {
    "search_flights": _search_flights,
    "get_flight": _get_flight,
    "search_hotels": _search_hotels,
    "get_hotel": _get_hotel,
    "book_flight": _book_flight,
    "book_hotel": _book_hotel,
    "list_bookings": _list_bookings,
    "get_booking": _get_booking,
    "cancel_booking": _cancel_booking,
    "pay_booking": _pay_booking,
    "get_payment": _get_payment,
    "list_travellers": _list_travellers,
}


# ---- resources -----------------------------------------------------------------------------


def resources(name: str, arguments: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(read, written) paths under flights/, hotels/, travellers/, bookings/ and payments/.

    Creating a booking or payment writes its whole collection (the id counter); cancelling
    writes flights, hotels and payments too, since the booking decides which seat, rooms and
    payment change.
    """
    a = arguments
    table: dict[str, Callable[[], tuple[list[str], list[str]]]] = {
        "search_flights": lambda: (["flights"], []),
        "get_flight": lambda: ([f"flights/{a['flight_id']}"], []),
        "search_hotels": lambda: (["hotels"], []),
        "get_hotel": lambda: ([f"hotels/{a['hotel_id']}"], []),
        "book_flight": lambda: (
            [f"travellers/{a['traveller_id']}"],
            [f"flights/{a['flight_id']}", "bookings"],
        ),
        "book_hotel": lambda: (
            [f"travellers/{a['traveller_id']}"],
            [f"hotels/{a['hotel_id']}", "bookings"],
        ),
        "list_bookings": lambda: ([f"travellers/{a['traveller_id']}", "bookings"], []),
        "get_booking": lambda: ([f"bookings/{a['booking_id']}"], []),
        "cancel_booking": lambda: (
            [],
            [f"bookings/{a['booking_id']}", "flights", "hotels", "payments"],
        ),
        "pay_booking": lambda: ([], [f"bookings/{a['booking_id']}", "payments"]),
        "get_payment": lambda: ([f"payments/{a['payment_id']}"], []),
        "list_travellers": lambda: (["travellers"], []),
    }
    return table[name]()


def changes(state: dict[str, Any], name: str, arguments: dict[str, Any]) -> list[str]:
    """The paths a write call will change, from the state before the call.

    Finer than :func:`resources`: a new booking or payment adds one entity under the next
    id; a cancellation changes its booking, the flight or hotel it holds and the payment it
    refunds.
    """
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
    return resources(name, arguments)[1]
