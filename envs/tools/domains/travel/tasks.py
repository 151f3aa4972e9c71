"""The travel task templates: entity pools and pickers, and the templates that need code.

The templates that differ only in data are recipes in ``tasks.json``; see
:mod:`agentgym.envs.tools.taskgen` for how both become tasks.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, timedelta
from typing import Any

from agentgym.envs.tools.backend import Domain, Task
from agentgym.envs.tools.backend import id_number as _num
from agentgym.envs.tools.domains.travel.tools import (
    AIRPORTS,
    BOOKING_STATUSES,
    CABIN_WORDS,
    CABINS,
    CITIES,
    FIRST_DAY,
    LAST_DAY,
    PAYMENT_METHODS,
)
from agentgym.envs.tools.taskgen import Draft, Drawing, TaskGen, draw_tasks, fact, load_recipes

DRAWING = Drawing(tries=40, unique="request+reply", rules=True)
"""One rng for all types; 40 tries per template; no (request, reply) repeats within a type."""


def generate(domain: Domain, state: dict[str, Any], seed: int, per_type: int) -> list[Task]:
    """``per_type`` travel tasks of each type for the initial ``state``, seeded by ``seed``."""
    return draw_tasks(TravelTasks(domain, state), seed, per_type, DRAWING)


def _refund(done: dict[str, Any]) -> str:
    """A cancellation's telling fact: the refund when there was one, else the booking id."""
    return fact(done["refund_amount"]) if done["refunded_payment_id"] else done["booking_id"]


def _cheapest(hits: list[dict[str, Any]], price: str, left: str, need: int) -> Any:
    """The one cheapest hit with enough availability, or None on none or a price tie."""
    ok = sorted((h for h in hits if h[left] >= need), key=lambda h: h[price])
    if not ok or (len(ok) > 1 and ok[0][price] == ok[1][price]):
        return None
    return ok[0]


class TravelTasks(TaskGen):
    """Task templates over one initial travel state; entities come from the replay's copy."""

    def __init__(self, domain: Domain, state: dict[str, Any]) -> None:
        """Index the state's entities into the pools recipes draw from."""
        super().__init__(domain, state, load_recipes(__package__ or __name__))
        self.tables["cabin_words"] = CABIN_WORDS
        ids = {c: sorted(state[c], key=_num) for c in ("flights", "hotels", "travellers")}
        self.pools.update(
            flights=[state["flights"][i] for i in ids["flights"]],
            hotels=[state["hotels"][i] for i in ids["hotels"]],
            travellers=[state["travellers"][i] for i in ids["travellers"]],
            flight_ids=ids["flights"],
            hotel_ids=ids["hotels"],
            payment_ids=sorted(state["payments"], key=_num),
            cities=CITIES,
            cabins=CABINS,
            methods=PAYMENT_METHODS,
        )

    # ---- pickers over the replay's state ------------------------------------------------------

    def _ids(self, collection: str) -> list[str]:
        return sorted(self.run.state[collection], key=_num)

    def _entity(self, collection: str) -> dict[str, Any]:
        found: dict[str, Any] = self.run.state[collection][self.rng.choice(self._ids(collection))]
        return found

    def _who(self, t: dict[str, Any]) -> str:
        return self.phrase(
            f"traveller {t['traveller_id']}", f"{t['name']} (traveller {t['traveller_id']})"
        )

    def seat(self) -> tuple[dict[str, Any], str] | None:
        """A flight and cabin with a seat left."""
        flights = self.run.state["flights"]
        open_ = [
            (flights[fid], c)
            for fid in self._ids("flights")
            for c in CABINS
            if flights[fid]["cabins"][c]["seats_left"] > 0
        ]
        return self.rng.choice(open_) if open_ else None

    def stay(self) -> tuple[str, str]:
        """Check-in and check-out dates of a stay of one to five nights."""
        start = self.rng.randint(0, 26)
        nights = self.rng.randint(1, min(5, 30 - start))
        check_in = FIRST_DAY + timedelta(days=start)
        return check_in.isoformat(), (check_in + timedelta(days=nights)).isoformat()

    def hotel(self, rooms: int = 1) -> dict[str, Any] | None:
        """A hotel with ``rooms`` rooms available."""
        hotels = self.run.state["hotels"]
        ok = [h for h in self._ids("hotels") if hotels[h]["rooms_available"] >= rooms]
        return hotels[self.rng.choice(ok)] if ok else None

    def booking(
        self, statuses: Sequence[str] = BOOKING_STATUSES, kind: str = ""
    ) -> dict[str, Any] | None:
        """A booking in one of ``statuses`` (and of ``kind`` when given)."""
        bookings = self.run.state["bookings"]
        ok = [
            b
            for b in (bookings[i] for i in self._ids("bookings"))
            if b["status"] in statuses and kind in ("", b["kind"])
        ]
        return self.rng.choice(ok) if ok else None

    def flight_args(self, f: dict[str, Any], cabin: str) -> dict[str, Any]:
        """The search_flights arguments that find flight ``f`` in ``cabin``."""
        return {
            "origin": f["origin"],
            "destination": f["destination"],
            "date": f["date"],
            "cabin": cabin,
        }

    def route(self, f: dict[str, Any], cabin: str) -> str:
        """E.g. 'economy flights from JFK to LHR on 2027-03-04'."""
        return (
            f"{CABIN_WORDS[cabin]} flights from {f['origin']} to {f['destination']} on {f['date']}"
        )

    def room_words(self, rooms: int) -> str:
        """'a room' or 'N rooms'."""
        return "a room" if rooms == 1 else f"{rooms} rooms"

    def march_day(self) -> str:
        """A random day of March 2027."""
        return (FIRST_DAY + timedelta(days=self.rng.randint(0, 30))).isoformat()

    # ---- single and multiple -------------------------------------------------------------------

    def s_search_flights(self) -> Draft | None:
        """A route search, sometimes cheapest first."""
        f, cabin = self._entity("flights"), self.rng.choice(CABINS)
        args = self.flight_args(f, cabin)
        by_price = self.rng.random() < 0.4
        if by_price:
            args["sort_by"] = "price"
        hit = self.run.one("search_flights", args)["flights"][0]
        order = ", cheapest first" if by_price else ""
        return Draft(
            f"Can you find {self.route(f, cabin)}{order}? I'd like the first option's flight id "
            "and fare.",
            (hit["flight_id"], fact(hit["price"])),
        )

    def s_search_hotels(self) -> Draft | None:
        """A hotel search in a city, sometimes under a nightly price."""
        city = self.rng.choice(CITIES)
        check_in, check_out = self.stay()
        args: dict[str, Any] = {"city": city, "check_in": check_in, "check_out": check_out}
        extra = ""
        if self.rng.random() < 0.5:
            prices = sorted(
                h["price_per_night"] for h in self.run.state["hotels"].values() if h["city"] == city
            )
            args["max_price"] = int(self.rng.choice(prices)) + self.rng.choice((1, 20, 60))
            extra = f" at most {args['max_price']} dollars a night"
        hit = self.run.one("search_hotels", args)["hotels"][0]
        return Draft(
            f"Which hotels in {city} have rooms{extra} from {check_in} to {check_out}? "
            "Tell me the cheapest and its total for the stay.",
            (hit["name"], fact(hit["total_price"])),
        )

    def s_cancel(self) -> Draft | None:
        """Cancel a live booking."""
        b = self.booking(("pending_payment", "paid"))
        if b is None:
            return None
        done = self.run.one("cancel_booking", booking_id=b["booking_id"])
        return Draft(
            f"Cancel booking {b['booking_id']}, please, and tell me what I get back.",
            (done["status"], _refund(done)),
        )

    def s_list_bookings(self) -> Draft | None:
        """A traveller's bookings, all, paid or unpaid."""
        t = self._entity("travellers")
        args: dict[str, Any] = {"traveller_id": t["traveller_id"]}
        status = self.rng.choice((None, "paid", "pending_payment"))
        if status:
            args["status"] = status
        found = self.run.one("list_bookings", args)["bookings"]
        if not found:
            return None
        which = {None: "", "paid": " paid", "pending_payment": " unpaid"}[status]
        return Draft(
            f"List all{which} bookings of {self._who(t)}.",
            tuple(b["booking_id"] for b in found[:3]),
        )

    def m_trip_search(self) -> Draft | None:
        """A flight search and a hotel search at its destination."""
        f, cabin = self._entity("flights"), self.rng.choice(CABINS)
        arrival = date.fromisoformat(f["date"])
        nights = self.rng.randint(1, 4)
        if arrival + timedelta(days=nights) > LAST_DAY:
            return None
        city = AIRPORTS[f["destination"]]
        check_out = (arrival + timedelta(days=nights)).isoformat()
        hit = self.run.one("search_flights", self.flight_args(f, cabin))["flights"][0]
        stay = {"city": city, "check_in": f["date"], "check_out": check_out}
        hotel = self.run.one("search_hotels", stay)["hotels"][0]
        return Draft(
            f"Look up {self.route(f, cabin)}, and also hotels in {city} from {f['date']} to "
            f"{check_out}. What's the first flight and the cheapest hotel?",
            (hit["flight_id"], hotel["name"]),
        )

    def m_cancel_then_show(self) -> Draft | None:
        """Cancel a booking, then show it."""
        b = self.booking(("pending_payment", "paid"))
        if b is None:
            return None
        done = self.run.one("cancel_booking", booking_id=b["booking_id"])
        view = self.run.one("get_booking", booking_id=b["booking_id"])
        return Draft(
            f"Cancel booking {b['booking_id']} and then pull it up again so I can see it's gone.",
            (view["status"], _refund(done)),
        )

    # ---- parallel ------------------------------------------------------------------------------

    def _views(self, tool: str, key: str, ids: list[str]) -> list[Any]:
        return self.run.turn(*((tool, {key: i}) for i in ids))

    def p_flights(self) -> Draft | None:
        """Departure times of two to four flights."""
        ids = self.rng.sample(self._ids("flights"), self.rng.randint(2, 4))
        views = self._views("get_flight", "flight_id", ids)
        return Draft(
            f"What are the departure times of flights {', '.join(ids[:-1])} and {ids[-1]}?",
            tuple(v["depart"] for v in views[:3]),
        )

    def p_hotels(self) -> Draft | None:
        """Nightly prices of two to four hotels."""
        ids = self.rng.sample(self._ids("hotels"), self.rng.randint(2, 4))
        views = self._views("get_hotel", "hotel_id", ids)
        return Draft(
            f"Compare the nightly prices of hotels {', '.join(ids[:-1])} and {ids[-1]}.",
            tuple(fact(v["price_per_night"]) for v in views[:3]),
        )

    def p_bookings(self) -> Draft | None:
        """Totals of two or three bookings."""
        ids = self.rng.sample(self._ids("bookings"), self.rng.randint(2, 3))
        views = self._views("get_booking", "booking_id", ids)
        return Draft(
            f"What are the totals of bookings {', '.join(ids[:-1])} and {ids[-1]}?",
            tuple(fact(v["total"]) for v in views),
        )

    def p_payments(self) -> Draft | None:
        """The bookings of two payments."""
        ids = self._ids("payments")
        if len(ids) < 2:
            return None
        chosen = self.rng.sample(ids, 2)
        views = self._views("get_payment", "payment_id", chosen)
        return Draft(
            f"Which bookings do payments {chosen[0]} and {chosen[1]} belong to?",
            tuple(v["booking_id"] for v in views),
        )

    def p_book_and_look(self) -> Draft | None:
        """Book a seat while looking up a hotel and a payment."""
        pick = self.seat()
        ids = self._ids("payments")
        if pick is None or not ids:
            return None
        f, cabin = pick
        t = self._entity("travellers")
        h = self.rng.choice(self._ids("hotels"))
        p = self.rng.choice(ids)
        book = {"flight_id": f["flight_id"], "traveller_id": t["traveller_id"], "cabin": cabin}
        done, hv, pv = self.run.turn(
            ("book_flight", book),
            ("get_hotel", {"hotel_id": h}),
            ("get_payment", {"payment_id": p}),
        )
        return Draft(
            f"Book {self._who(t)} a {CABIN_WORDS[cabin]} seat on flight {f['flight_id']}, and "
            f"in parallel look up hotel {h}'s name and the amount of payment {p}.",
            (done["booking_id"], hv["name"], fact(pv["amount"])),
        )

    def p_cancel_and_look(self) -> Draft | None:
        """Cancel a booking while looking up another and the travellers."""
        b = self.booking(("pending_payment", "paid"))
        if b is None:
            return None
        other = self.rng.choice([i for i in self._ids("bookings") if i != b["booking_id"]])
        done, ov, tv = self.run.turn(
            ("cancel_booking", {"booking_id": b["booking_id"]}),
            ("get_booking", {"booking_id": other}),
            ("list_travellers", {}),
        )
        return Draft(
            f"Cancel booking {b['booking_id']}. While you're at it, what's the status of booking "
            f"{other}, and who is the first of my saved travellers?",
            (_refund(done), ov["status"], tv["travellers"][0]["name"]),
        )

    # ---- dependent -----------------------------------------------------------------------------

    def _book_seat(self, f: dict[str, Any], t: dict[str, Any], cabin: str) -> Any:
        return self.run.one(
            "book_flight", flight_id=f["flight_id"], traveller_id=t["traveller_id"], cabin=cabin
        )

    def d_search_then_book(self) -> Draft | None:
        """Book the cheapest flight with seats found by a search, maybe paying for it."""
        f, cabin = self._entity("flights"), self.rng.choice(CABINS)
        t = self._entity("travellers")
        found = self.run.one("search_flights", self.flight_args(f, cabin))["flights"]
        best = _cheapest(found, "price", "seats_left", 1)
        if best is None:
            return None
        done = self._book_seat(best, t, cabin)
        facts: tuple[str, ...] = (done["booking_id"], fact(done["total"]))
        pay = ""
        if self.rng.random() < 0.5:
            method = self.rng.choice(PAYMENT_METHODS)
            paid = self.run.one("pay_booking", booking_id=done["booking_id"], payment_method=method)
            facts = (done["booking_id"], paid["payment_id"], fact(paid["amount"]))
            pay = f" and pay for it with {method}"
        return Draft(
            f"Find {self.route(f, cabin)} and book {self._who(t)} on the cheapest one that still "
            f"has seats{pay}.",
            facts,
        )

    def d_search_then_book_hotel(self) -> Draft | None:
        """Book the cheapest hotel with rooms found by a search."""
        city = self.rng.choice(CITIES)
        check_in, check_out = self.stay()
        rooms = self.rng.randint(1, 2)
        t = self._entity("travellers")
        stay = {"check_in": check_in, "check_out": check_out}
        found = self.run.one("search_hotels", {"city": city, **stay})
        best = _cheapest(found["hotels"], "price_per_night", "rooms_available", rooms)
        if best is None:
            return None
        done = self.run.one(
            "book_hotel",
            {"hotel_id": best["hotel_id"], "traveller_id": t["traveller_id"], **stay},
            rooms=rooms,
        )
        return Draft(
            f"Book {self.room_words(rooms)} for {self._who(t)} at the cheapest hotel in {city} "
            f"with enough space, from {check_in} to {check_out}.",
            (best["name"], done["booking_id"], fact(done["total"])),
        )

    def d_booking_flight(self) -> Draft | None:
        """A flight booking's flight, looked up."""
        b = self.booking(kind="flight")
        if b is None:
            return None
        view = self.run.one("get_booking", booking_id=b["booking_id"])
        fv = self.run.one("get_flight", flight_id=view["flight_id"])
        return Draft(
            f"What time does the flight in booking {b['booking_id']} take off, and what's its "
            "flight number?",
            (fv["depart"], fv["flight_number"]),
        )

    def d_booking_hotel(self) -> Draft | None:
        """A hotel booking's hotel, looked up."""
        b = self.booking(kind="hotel")
        if b is None:
            return None
        view = self.run.one("get_booking", booking_id=b["booking_id"])
        hv = self.run.one("get_hotel", hotel_id=view["hotel_id"])
        return Draft(
            f"Which hotel is booking {b['booking_id']} at, and which amenities does it offer?",
            (hv["name"], *hv["amenities"][:2]),
        )

    def d_book_then_pay(self) -> Draft | None:
        """Book a seat, then pay for the new booking."""
        pick = self.seat()
        if pick is None:
            return None
        f, cabin = pick
        t = self._entity("travellers")
        method = self.rng.choice(PAYMENT_METHODS)
        done = self._book_seat(f, t, cabin)
        paid = self.run.one("pay_booking", booking_id=done["booking_id"], payment_method=method)
        return Draft(
            f"Put {self._who(t)} on flight {f['flight_id']} in {CABIN_WORDS[cabin]} and pay for "
            f"the booking with {method} right away.",
            (done["booking_id"], paid["payment_id"], fact(paid["amount"])),
        )

    def d_pay_then_receipt(self) -> Draft | None:
        """Pay a booking, then fetch the new payment."""
        b = self.booking(("pending_payment",))
        if b is None:
            return None
        method = self.rng.choice(PAYMENT_METHODS)
        paid = self.run.one("pay_booking", booking_id=b["booking_id"], payment_method=method)
        view = self.run.one("get_payment", payment_id=paid["payment_id"])
        return Draft(
            f"Pay booking {b['booking_id']} with {method}, then fetch the payment record to "
            "confirm it went through.",
            (view["payment_id"], view["status"], fact(view["amount"])),
        )

    def d_traveller_bookings(self) -> Draft | None:
        """A traveller known by name: their id from the list, then their bookings."""
        t = self._entity("travellers")
        found = self.run.one("list_travellers")["travellers"]
        match = next(x for x in found if x["name"] == t["name"])
        listed = self.run.one("list_bookings", traveller_id=match["traveller_id"])
        if not listed["bookings"]:
            return None
        return Draft(
            f"What bookings does {t['name']} have?",
            tuple(b["booking_id"] for b in listed["bookings"][:3]),
        )

    def d_payment_then_cancel(self) -> Draft | None:
        """A payment's booking, then cancelled."""
        payments = self.run.state["payments"]
        live = [p for p in self._ids("payments") if payments[p]["status"] == "captured"]
        if not live:
            return None
        p = self.rng.choice(live)
        view = self.run.one("get_payment", payment_id=p)
        done = self.run.one("cancel_booking", booking_id=view["booking_id"])
        return Draft(
            f"I no longer need the trip I paid for with payment {p}; cancel that booking and "
            "tell me the refund.",
            (done["booking_id"], _refund(done)),
        )

    def d_hotel_at_destination(self) -> Draft | None:
        """Hotels at a flight booking's destination from the day of the flight."""
        b = self.booking(("pending_payment", "paid"), kind="flight")
        nights = self.rng.randint(1, 3)
        if b is None or date.fromisoformat(b["date"]) + timedelta(days=nights) > LAST_DAY:
            return None
        view = self.run.one("get_booking", booking_id=b["booking_id"])
        fv = self.run.one("get_flight", flight_id=view["flight_id"])
        arrival = date.fromisoformat(fv["date"])
        check_out = (arrival + timedelta(days=nights)).isoformat()
        stay = {"city": fv["destination_city"], "check_in": fv["date"], "check_out": check_out}
        found = self.run.one("search_hotels", stay)
        night_words = "one night" if nights == 1 else f"{nights} nights"
        return Draft(
            f"Find hotels for {night_words} in the city that booking {b['booking_id']} flies to, "
            "starting on the day of the flight. Which is cheapest?",
            (found["hotels"][0]["name"], fact(found["hotels"][0]["total_price"])),
        )

    # ---- clarification -------------------------------------------------------------------------

    def c_cancel(self) -> Draft | None:
        """Cancel a booking the request does not name."""
        b = self.booking(("pending_payment", "paid"))
        if b is None:
            return None
        done = self.run.one("cancel_booking", booking_id=b["booking_id"])
        return Draft(
            self.phrase("I need to cancel one of my bookings.", "Please cancel my booking."),
            (done["status"], _refund(done)),
            f"It's booking {b['booking_id']}.",
            {"booking_id": b["booking_id"]},
        )
