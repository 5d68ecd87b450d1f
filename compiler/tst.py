"""Tensor syntax trees (HASCO section IV-B): the shape of a computation, for matching.

A TST abstracts a workload (or an intrinsic, which is also a workload) into a tree whose leaves
are the index occurrences of its tensor dimensions and whose internal nodes are operations::

    accumulate
    +-- C            (access: the output)
    |   +-- k  +-- x  +-- y
    +-- sum c,r,s
        +-- mul
            +-- A    (access)
            |   +-- c
            |   +-- add          a dimension with two or more indices: x+r
            |   |   +-- x  +-- r
            |   +-- add  (y+s)
            +-- B    +-- k  +-- c  +-- r  +-- s

The order of an access's children is the tensor's data layout. A dimension with one index is a
leaf directly under the access (its coefficient and offset are a stride and a base address, not
structure); two or more indices sharing a dimension hang under an ``add`` node, because their
*relation* (a sliding window) is structure the intrinsic must reproduce.

Products of more than two tensors associate to the left as written (``A*B*C`` is
``(A*B)*C``), and each product node sums the indices that no later operand nor the output
needs, so MTTKRP ``D[i,j] += A[i,k,l]*B[l,j]*C[k,j]`` becomes
``sum k ((sum l A*B) * C)`` -- HASCO's two stages ``E[i,k,j] = sum A*B`` and
``D = sum E*C``. `stages` returns each product node as a two-input workload of its own, whose
intermediate inputs are named after their subtree (``(A*B)``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tensorforge.compiler.workload import Access, AffineExpr, Workload

Path = tuple[int, ...]


@dataclass(frozen=True)
class Node:
    """One TST node. ``op`` is accumulate, access, sum, mul, add or index (a leaf)."""

    op: str
    label: str = ""
    children: tuple[Node, ...] = ()
    coef: int = 1  # leaves only: the index's coefficient in its dimension

    def render(self, indent: str = "") -> str:
        """The tree as indented text (what `tensorforge choices --tree` prints)."""
        coef = f" (x{self.coef})" if self.op == "index" and self.coef != 1 else ""
        lines = [f"{indent}{self.op} {self.label}{coef}".rstrip()]
        lines += [child.render(indent + "  ") for child in self.children]
        return "\n".join(lines)


@dataclass(frozen=True)
class Leaf:
    """An index occurrence: where it is and what it names."""

    path: Path  # child positions from the root
    index: str
    coef: int
    tensor: str  # label of the access node it belongs to
    operand: int  # -1 for the output, else the position of the input in the product
    dim: int  # dimension of the tensor it sits in
    in_add: bool  # shares its dimension with other indices


@dataclass(frozen=True)
class TST:
    """A tensor syntax tree with its leaves listed once, for matching."""

    root: Node
    leaves: tuple[Leaf, ...]

    def node(self, path: Path) -> Node:
        node = self.root
        for position in path:
            node = node.children[position]
        return node

    def lca(self, first: Path, second: Path) -> Path:
        """Path of the lowest common ancestor of two leaves."""
        common = 0
        while common < min(len(first), len(second)) and first[common] == second[common]:
            common += 1
        return first[:common]

    def render(self) -> str:
        return self.root.render()


def _dim_node(dim: AffineExpr) -> Node:
    if len(dim.terms) == 1:
        name, coef = dim.terms[0]
        return Node("index", name, coef=coef)
    label = f"{dim.constant:+d}" if dim.constant else ""
    leaves = tuple(Node("index", name, coef=coef) for name, coef in dim.terms)
    return Node("add", label, leaves)


def _access_node(access: Access) -> Node:
    return Node("access", access.tensor, tuple(_dim_node(dim) for dim in access.dims))


def build_tst(workload: Workload) -> TST:
    """The TST of ``workload``: left-associated products, each summing what it alone uses."""
    body = _access_node(workload.inputs[0])
    for position, (_, reduced) in enumerate(_products(workload)):
        operand = _access_node(workload.inputs[position + 1])
        body = Node("mul", "*", (body, operand))
        if reduced:
            body = Node("sum", ",".join(reduced), (body,))
    if len(workload.inputs) == 1 and workload.reduction_indices:
        body = Node("sum", ",".join(workload.reduction_indices), (body,))
    root = Node("accumulate", "+=", (_access_node(workload.output), body))
    return TST(root, tuple(_leaves(root, workload)))


def _leaves(root: Node, workload: Workload) -> list[Leaf]:
    """Leaves in tree order; operands are numbered by the access order of the workload."""
    found: list[Leaf] = []
    operand_of = {id(root.children[0]): -1}  # the output; inputs are met in product order
    next_operand = iter(range(len(workload.inputs)))

    def walk(node: Node, path: Path) -> None:
        if node.op == "access":
            operand = operand_of.get(id(node))
            if operand is None:
                operand = next(next_operand)
            for dim, child in enumerate(node.children):
                if child.op == "index":
                    found.append(
                        Leaf((*path, dim), child.label, child.coef, node.label, operand, dim, False)
                    )
                for term, leaf in enumerate(child.children):
                    found.append(
                        Leaf(
                            (*path, dim, term),
                            leaf.label,
                            leaf.coef,
                            node.label,
                            operand,
                            dim,
                            True,
                        )
                    )
            return
        for position, child in enumerate(node.children):
            walk(child, (*path, position))

    walk(root, ())
    return found


def _products(workload: Workload) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """For each product node: (indices of its result, indices it sums away)."""
    results = []
    seen = list(workload.inputs[0].indices)
    for position in range(1, len(workload.inputs)):
        seen += [i for i in workload.inputs[position].indices if i not in seen]
        later = {i for a in workload.inputs[position + 1 :] for i in a.indices}
        needed = set(workload.output.indices) | later
        result = tuple(i for i in seen if i in needed)
        reduced = tuple(i for i in seen if i not in needed)
        results.append((result, reduced))
        seen = list(result)
    return results


def stages(workload: Workload) -> tuple[Workload, ...]:
    """Each product node as a two-input workload (innermost first; the last is the root).

    An intermediate result is an input named after its subtree, indexed by plain indices in
    order of first appearance: HASCO's ``E[i,k,j]`` for MTTKRP is ``(A*B)[i,k,j]`` here.
    """
    found: list[Workload] = []
    sizes = workload.sizes
    left = workload.inputs[0]
    products = _products(workload)
    for position, (result, _) in enumerate(products):
        right = workload.inputs[position + 1]
        last = position == len(products) - 1
        output = (
            workload.output if last else _plain_access(f"({left.tensor}*{right.tensor})", result)
        )
        used = dict.fromkeys([*output.indices, *left.indices, *right.indices])
        extents = tuple((i, sizes[i]) for i in used)
        overrides = tuple(
            (t, s) for t, s in workload.shape_overrides if t in (left.tensor, right.tensor)
        )
        name = workload.name if len(products) == 1 else f"{workload.name}/stage{position}"
        found.append(Workload(name, output, (left, right), extents, overrides,
                              workload.reduction))
        left = output
    return tuple(found)


def _plain_access(tensor: str, indices: tuple[str, ...]) -> Access:
    return Access(tensor, tuple(AffineExpr(((i, 1),)) for i in indices))
