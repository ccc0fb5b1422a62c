// simpy's event loop (simpy.core.Environment with simpy.events: Event, Timeout, Process, AllOf), as
// lachesis/node/simulator.py drives it, natively: the same order of events, so the same run.  A binary heap of (time,
// priority, event id) as simpy's: a process starts with an urgent Initialize event and ends with its own event
// scheduled at once; succeed schedules at once, a timeout at now + delay; callbacks run in the order registered; an
// AllOf checks a processed event at once and a pending one when it is processed.  A failure fails the process, is
// thrown into its waiters through their AllOf, and leaves run() when an event fails with no one to take it, exactly
// where simpy's Environment.run raises.  One timer may be held beside the heap (the decode engine's, decode.hpp),
// with the event id simpy gives it; a superseded one is dropped (the reference's stays scheduled and does nothing).
#pragma once

#include <exception>
#include <functional>
#include <queue>
#include <vector>

namespace lachesis {

class Environment {
public:
    static constexpr int URGENT = 0, NORMAL = 1;  // simpy.core.URGENT, simpy.core.NORMAL

    // What the loop calls back: a process's next step (the event it waits for, or -1 once it returns) and the timer.
    struct Host {
        virtual int step(int pid) = 0;
        virtual void on_timer() = 0;
        virtual ~Host() = default;
    };

    explicit Environment(Host& host) : host_(host) {}
    // simpy's clock starts at the int 0 and stays an int until an event scheduled with a float delay (a timeout)
    // comes due; zero-delay events keep the clock's type (a sample's time carries it)
    double now() const { return now_; }
    bool now_is_int() const { return now_is_int_; }

    int new_event();                                            // simpy.events.Event(env)
    void schedule(int ev, int prio, double delay, bool zero_delay = false);  // Environment.schedule
    void succeed(int ev) { E_[ev].triggered = true; E_[ev].ok = true; schedule(ev, NORMAL, 0.0, true); }
    int timeout(double delay) { const int e = new_event(); E_[e].triggered = true; schedule(e, NORMAL, delay); return e; }
    int process(int pid);                                       // Process(env, pid's generator): its own event
    int all_of(const std::vector<int>& events);                 // Environment.all_of
    void hold(int ev) { E_[ev].holds += 1; }                    // a reference kept until release (a kid list)
    void release(int ev);
    bool processed(int ev) const { return E_[ev].processed; }
    int stop_at(double t);                                      // simulator._stop_at: an urgent event at time t
    // The side timer: a triggered event calling Host::on_timer at now + delay, superseding the pending one.
    void set_timer(double delay);
    void drop_timer();
    // Environment.run(until=ev): process events until ev has been processed; rethrows a failure no one takes.
    void run(int until);
    // Called every so many events while run() runs (a pending interrupt may throw from it).
    std::function<void()> interrupt_check;
    static constexpr unsigned INTERRUPT_EVERY = 1u << 14;

private:
    enum CbKind : unsigned char { CB_RESUME, CB_CHECK, CB_TIMER, CB_STOP };
    struct Cb { CbKind kind; int target; };
    struct Ev {
        std::vector<Cb> cbs;
        bool triggered = false, processed = false, ok = true, defused = false;
        int holds = 0;                      // references that keep a processed event (a kid list before its AllOf)
        int cond_need = 0, cond_count = 0;  // an AllOf
        bool recyclable = true;
        std::exception_ptr err;
    };
    struct Item { double t; int prio; unsigned long long eid; int ev; bool int_time; };
    struct Later {
        bool operator()(const Item& a, const Item& b) const {
            if (a.t != b.t) return a.t > b.t;
            if (a.prio != b.prio) return a.prio > b.prio;
            return a.eid > b.eid;
        }
    };
    void resume(int pid, int ev);  // Process._resume
    void check(int cond, int ev);  // Condition._check
    void fail_process(int pid, std::exception_ptr err);

    Host& host_;
    std::vector<Ev> E_;
    std::vector<int> free_ev_;
    std::vector<int> done_;  // each process's own event
    std::priority_queue<Item, std::vector<Item>, Later> queue_;
    unsigned long long eid_ = 0;
    double now_ = 0.0;
    bool now_is_int_ = true;
    bool stopped_ = false;
    int timer_ = -1;  // the pending side timer's event (-1: none), scheduled at timer_item_
    Item timer_item_{};
    unsigned count_ = 0;
};

}  // namespace lachesis
