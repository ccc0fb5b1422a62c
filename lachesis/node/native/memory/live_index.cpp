// live_index.LiveSegments' demand tree (live_index.hpp).
#include "live_index.hpp"

namespace lachesis {

void DemandTree::split(int t, double k, i64 s, int& a, int& b) {
    if (t < 0) { a = b = -1; return; }
    Node& n = nodes[std::size_t(t)];
    if (before(n.key, n.seq, k, s)) { split(n.r, k, s, n.r, b); a = t; }
    else { split(n.l, k, s, a, n.l); b = t; }
    pull(t);
}

int DemandTree::merge(int a, int b) {
    if (a < 0) return b;
    if (b < 0) return a;
    if (nodes[std::size_t(a)].prio > nodes[std::size_t(b)].prio) {
        const int r = merge(nodes[std::size_t(a)].r, b);
        nodes[std::size_t(a)].r = r;
        pull(a);
        return a;
    }
    const int l = merge(a, nodes[std::size_t(b)].l);
    nodes[std::size_t(b)].l = l;
    pull(b);
    return b;
}

void DemandTree::insert(int id, double k, i64 s, i64 val) {
    if (std::size_t(id) >= nodes.size()) nodes.resize(std::size_t(id) + 1);
    state ^= state << 13; state ^= state >> 7; state ^= state << 17;
    nodes[std::size_t(id)] = Node{k, s, val, val, std::uint32_t(state >> 32), -1, -1};
    int a, b;
    split(root, k, s, a, b);
    root = merge(merge(a, id), b);
}

void DemandTree::erase(int id) {
    const Node n = nodes[std::size_t(id)];
    int a, b, m, c;
    split(root, n.key, n.seq, a, b);
    split(b, n.key, n.seq + 1, m, c);  // m: the node alone (open orders are unique)
    root = merge(a, c);
}

void DemandTree::set(int id, i64 val) {
    Node& target = nodes[std::size_t(id)];
    const i64 d = val - target.val;
    if (!d) return;
    target.val = val;
    const double k = target.key;
    const i64 s = target.seq;
    for (int t = root; t >= 0;) {
        Node& n = nodes[std::size_t(t)];
        n.sum += d;
        if (t == id) break;
        t = before(k, s, n.key, n.seq) ? n.l : n.r;
    }
}

i64 DemandTree::ahead(double k, i64 s) const {
    i64 acc = 0;
    for (int t = root; t >= 0;) {
        const Node& n = nodes[std::size_t(t)];
        if (before(n.key, n.seq, k, s)) { acc += sum(n.l) + n.val; t = n.r; }
        else t = n.l;
    }
    return acc;
}

void LiveSegments::activate(const Rows& rows) {
    active = true;
    for (std::size_t ri = 0; ri < rows.rows.size(); ++ri)
        if (rows.rows[ri].live) opened(rows.rows[ri], int(ri));
}

}  // namespace lachesis
