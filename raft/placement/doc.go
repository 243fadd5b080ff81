// Package placement plans where the replicas of a node's Raft groups live
// when the cluster has more nodes than each group has voters (issue 30,
// "R of N"): which group gains a voter on which node, and which voter it
// then loses, so that every group ends with R voters on live nodes and the
// groups are spread evenly over the nodes.
//
// It is a pure function of what it is given (the groups' voters, the
// nodes and whether each is live or leaving, R): no clock, no random, no
// map order, so every node that plans from the same directory state plans
// the same steps, and a plan can be checked by a test without a cluster.
// Carrying a plan out (add the new voter as a non-voter, let it catch up by
// snapshot, promote it, then remove the old one) is the caller's: the plan
// only ever says "add, then remove", so a group it is carried out on never
// has fewer than R voters.
//
// The rules, in the order a plan applies them:
//
//  1. Repair: a voter on a node that is dead (not live) or leaving is
//     replaced by one on an eligible node (live, not leaving, not already a
//     voter of the group), the least loaded first, ties to the lowest id.
//  2. Size: a group with fewer than R voters gains some the same way; one
//     with more loses voters from its most loaded nodes.
//  3. Spread: while the most loaded eligible node holds two or more
//     replicas than the least loaded, one of its groups (the lowest id that
//     the least loaded node is not a voter of) moves a replica there. When
//     it stops, no node holds more than ceil(G·R/N) replicas, N being the
//     eligible nodes: the bound issue 30 asks for, and a joining node, which
//     holds none, receives its share.
//
// Leaders are spread by cluster.Host as they are now (each group's preferred
// member, by the sorted order of its voters).
package placement
